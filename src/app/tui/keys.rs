//! The key map: a key, in the state the screen is in, to what it does. Pure, so every key
//! of the spec is tested without a terminal.
//!
//! | key | does |
//! |---|---|
//! | Enter / Shift+Enter (or Alt+Enter) | send the input / a newline in it |
//! | ↑ ↓, mouse wheel | scroll the conversation (in a multi-line input, move the cursor first); with the conversation focused, select the previous / next message |
//! | PgUp PgDn | page the conversation |
//! | gg G | the top / the end of the conversation (conversation or panels focused) |
//! | Ctrl-P Ctrl-N | the previous / next input of the history |
//! | Tab | focus: input → conversation → panels |
//! | Esc | closes an overlay; from the input to the conversation, and back |
//! | Enter (conversation) | expand or fold a tool call |
//! | p | the panels as an overlay |
//! | y | yank the selected message or panel (OSC 52) |
//! | ? or F1 | help |
//! | q | quit (outside the input: there it is typed) |
//! | Ctrl-C | stop the turn; else clear the input; else quit |
//! | Ctrl-D | quit, when the input is empty |
//!
//! Letters are commands only while the conversation or the panels have the focus: in the
//! input they are typed (a message may start with `p` or `q`).

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What has the keyboard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Focus {
    /// The input box.
    Input,
    /// The conversation: a message is selected.
    Conversation,
    /// The panels: a panel is selected.
    Panels,
}

/// An overlay over the screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Overlay {
    /// None.
    None,
    /// The keys.
    Help,
    /// The panels, full size.
    Panels,
}

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Send the input.
    Submit,
    /// A newline in the input.
    Newline,
    /// The key edits the input.
    Edit(KeyEvent),
    /// Focus the input and type the key there.
    TypeInInput(KeyEvent),
    /// Move the input's cursor up / down a line.
    CursorUp,
    /// See [`Action::CursorUp`].
    CursorDown,
    /// Scroll the conversation up (towards older) by lines.
    ScrollUp(u16),
    /// Scroll down by lines.
    ScrollDown(u16),
    /// A page up.
    PageUp,
    /// A page down.
    PageDown,
    /// The oldest message.
    Top,
    /// The newest, following new ones.
    Bottom,
    /// The previous selection (message or panel).
    SelectPrev,
    /// The next selection.
    SelectNext,
    /// Expand or fold the selected tool call.
    Toggle,
    /// The previous input of the history.
    HistoryPrev,
    /// The next input of the history.
    HistoryNext,
    /// The next focus.
    FocusNext,
    /// Focus the input.
    FocusInput,
    /// Show or hide the panels overlay.
    PanelsOverlay,
    /// Show or hide the help.
    Help,
    /// Close the overlay.
    CloseOverlay,
    /// Yank the selected message or panel.
    Yank,
    /// Stop the running turn.
    Interrupt,
    /// Empty the input.
    ClearInput,
    /// End the session.
    Quit,
    /// Nothing.
    None,
}

/// The state a key is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KeyCtx {
    /// What has the keyboard.
    pub(super) focus: Focus,
    /// The overlay shown.
    pub(super) overlay: Overlay,
    /// The input holds nothing.
    pub(super) input_empty: bool,
    /// The input's lines.
    pub(super) input_lines: usize,
    /// The row of the input's cursor.
    pub(super) cursor_row: usize,
    /// A turn runs.
    pub(super) busy: bool,
}

/// What `key` does in `ctx`; `pending_g` remembers a first `g` of `gg`.
pub(super) fn map(key: KeyEvent, ctx: &KeyCtx, pending_g: &mut bool) -> Action {
    let was_g = std::mem::take(pending_g);
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    let plain = !ctrl && !key.modifiers.contains(KeyModifiers::ALT);
    if ctrl {
        match key.code {
            KeyCode::Char('c') if ctx.busy => return Action::Interrupt,
            KeyCode::Char('c') if !ctx.input_empty => return Action::ClearInput,
            KeyCode::Char('c') => return Action::Quit,
            KeyCode::Char('d') if ctx.input_empty => return Action::Quit,
            KeyCode::Char('p') => return Action::HistoryPrev,
            KeyCode::Char('n') => return Action::HistoryNext,
            _ => {}
        }
    }
    if ctx.overlay != Overlay::None {
        return match key.code {
            KeyCode::Esc | KeyCode::Char('q') => Action::CloseOverlay,
            KeyCode::Char('?') | KeyCode::F(1) if ctx.overlay == Overlay::Help => {
                Action::CloseOverlay
            }
            KeyCode::Char('p') if ctx.overlay == Overlay::Panels => Action::CloseOverlay,
            KeyCode::Char('y') if ctx.overlay == Overlay::Panels => Action::Yank,
            KeyCode::Tab | KeyCode::Right | KeyCode::Char('j' | 'l')
                if ctx.overlay == Overlay::Panels =>
            {
                Action::SelectNext
            }
            KeyCode::BackTab | KeyCode::Left | KeyCode::Char('k' | 'h')
                if ctx.overlay == Overlay::Panels =>
            {
                Action::SelectPrev
            }
            KeyCode::Up => Action::SelectPrev,
            KeyCode::Down => Action::SelectNext,
            _ => Action::None,
        };
    }
    match key.code {
        KeyCode::Tab | KeyCode::BackTab => return Action::FocusNext,
        KeyCode::PageUp => return Action::PageUp,
        KeyCode::PageDown => return Action::PageDown,
        KeyCode::F(1) => return Action::Help,
        _ => {}
    }
    match ctx.focus {
        Focus::Input => match key.code {
            KeyCode::Enter
                if key
                    .modifiers
                    .intersects(KeyModifiers::SHIFT | KeyModifiers::ALT) =>
            {
                Action::Newline
            }
            KeyCode::Enter => Action::Submit,
            KeyCode::Up if ctx.input_lines > 1 && ctx.cursor_row > 0 => Action::CursorUp,
            KeyCode::Up => Action::ScrollUp(1),
            KeyCode::Down if ctx.input_lines > 1 && ctx.cursor_row + 1 < ctx.input_lines => {
                Action::CursorDown
            }
            KeyCode::Down => Action::ScrollDown(1),
            KeyCode::Esc => Action::FocusNext,
            _ => Action::Edit(key),
        },
        Focus::Conversation | Focus::Panels => match key.code {
            KeyCode::Up => Action::SelectPrev,
            KeyCode::Down => Action::SelectNext,
            KeyCode::Esc => Action::FocusInput,
            KeyCode::Enter if ctx.focus == Focus::Conversation => Action::Toggle,
            KeyCode::Char('g') if plain && was_g => Action::Top,
            KeyCode::Char('g') if plain => {
                *pending_g = true;
                Action::None
            }
            KeyCode::Char('G') => Action::Bottom,
            KeyCode::Right | KeyCode::Char('j' | 'l')
                if ctx.focus == Focus::Panels && (plain || key.code == KeyCode::Right) =>
            {
                Action::SelectNext
            }
            KeyCode::Left | KeyCode::Char('k' | 'h')
                if ctx.focus == Focus::Panels && (plain || key.code == KeyCode::Left) =>
            {
                Action::SelectPrev
            }
            KeyCode::Char('p') if plain => Action::PanelsOverlay,
            KeyCode::Char('y') if plain => Action::Yank,
            KeyCode::Char('?') => Action::Help,
            KeyCode::Char('q') if plain && ctx.input_empty => Action::Quit,
            KeyCode::Char('q') if plain => Action::FocusInput,
            KeyCode::Char(_) if plain || key.modifiers == KeyModifiers::SHIFT => {
                Action::TypeInInput(key)
            }
            _ => Action::None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(focus: Focus) -> KeyCtx {
        KeyCtx {
            focus,
            overlay: Overlay::None,
            input_empty: true,
            input_lines: 1,
            cursor_row: 0,
            busy: false,
        }
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn with(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    fn one(k: KeyEvent, c: &KeyCtx) -> Action {
        map(k, c, &mut false)
    }

    #[test]
    fn enter_sends_and_shift_enter_breaks_the_line() {
        let c = ctx(Focus::Input);
        assert_eq!(one(key(KeyCode::Enter), &c), Action::Submit);
        assert_eq!(
            one(with(KeyCode::Enter, KeyModifiers::SHIFT), &c),
            Action::Newline
        );
        assert_eq!(
            one(with(KeyCode::Enter, KeyModifiers::ALT), &c),
            Action::Newline
        );
    }

    #[test]
    fn arrows_scroll_unless_a_multi_line_input_has_room_to_move() {
        let mut c = ctx(Focus::Input);
        assert_eq!(one(key(KeyCode::Up), &c), Action::ScrollUp(1));
        assert_eq!(one(key(KeyCode::Down), &c), Action::ScrollDown(1));
        c.input_lines = 3;
        c.cursor_row = 1;
        assert_eq!(one(key(KeyCode::Up), &c), Action::CursorUp);
        assert_eq!(one(key(KeyCode::Down), &c), Action::CursorDown);
        c.cursor_row = 0;
        assert_eq!(one(key(KeyCode::Up), &c), Action::ScrollUp(1));
        c.cursor_row = 2;
        assert_eq!(one(key(KeyCode::Down), &c), Action::ScrollDown(1));
    }

    #[test]
    fn pages_history_focus_and_help_work_everywhere() {
        for f in [Focus::Input, Focus::Conversation, Focus::Panels] {
            let c = ctx(f);
            assert_eq!(one(key(KeyCode::PageUp), &c), Action::PageUp);
            assert_eq!(one(key(KeyCode::PageDown), &c), Action::PageDown);
            assert_eq!(one(key(KeyCode::Tab), &c), Action::FocusNext);
            assert_eq!(one(key(KeyCode::F(1)), &c), Action::Help);
            let ctrl = KeyModifiers::CONTROL;
            assert_eq!(one(with(KeyCode::Char('p'), ctrl), &c), Action::HistoryPrev);
            assert_eq!(one(with(KeyCode::Char('n'), ctrl), &c), Action::HistoryNext);
        }
    }

    #[test]
    fn the_panels_overlay_and_column_switch_panels() {
        let mut c = ctx(Focus::Conversation);
        c.overlay = Overlay::Panels;
        for k in [
            KeyCode::Tab,
            KeyCode::Down,
            KeyCode::Right,
            KeyCode::Char('j'),
            KeyCode::Char('l'),
        ] {
            assert_eq!(one(key(k), &c), Action::SelectNext, "{k:?}");
        }
        for k in [
            KeyCode::BackTab,
            KeyCode::Up,
            KeyCode::Left,
            KeyCode::Char('k'),
            KeyCode::Char('h'),
        ] {
            assert_eq!(one(key(k), &c), Action::SelectPrev, "{k:?}");
        }
        let c = ctx(Focus::Panels);
        assert_eq!(one(key(KeyCode::Char('j')), &c), Action::SelectNext);
        assert_eq!(one(key(KeyCode::Left), &c), Action::SelectPrev);
        // In the conversation, j is typed into the input.
        let c = ctx(Focus::Conversation);
        assert!(matches!(
            one(key(KeyCode::Char('j')), &c),
            Action::TypeInInput(_)
        ));
    }

    #[test]
    fn gg_and_g_jump_to_the_ends() {
        let c = ctx(Focus::Conversation);
        let mut pending = false;
        assert_eq!(map(key(KeyCode::Char('g')), &c, &mut pending), Action::None);
        assert!(pending);
        assert_eq!(map(key(KeyCode::Char('g')), &c, &mut pending), Action::Top);
        assert!(!pending);
        // A g, then something else: no jump.
        map(key(KeyCode::Char('g')), &c, &mut pending);
        assert_eq!(
            map(key(KeyCode::Down), &c, &mut pending),
            Action::SelectNext
        );
        assert_eq!(map(key(KeyCode::Char('g')), &c, &mut pending), Action::None);
        assert_eq!(
            map(
                with(KeyCode::Char('G'), KeyModifiers::SHIFT),
                &c,
                &mut pending
            ),
            Action::Bottom
        );
    }

    #[test]
    fn letters_are_commands_outside_the_input_only() {
        let c = ctx(Focus::Conversation);
        assert_eq!(one(key(KeyCode::Char('p')), &c), Action::PanelsOverlay);
        assert_eq!(one(key(KeyCode::Char('y')), &c), Action::Yank);
        assert_eq!(one(key(KeyCode::Char('?')), &c), Action::Help);
        assert_eq!(one(key(KeyCode::Char('q')), &c), Action::Quit);
        assert_eq!(one(key(KeyCode::Enter), &c), Action::Toggle);
        assert_eq!(one(key(KeyCode::Esc), &c), Action::FocusInput);
        let x = key(KeyCode::Char('x'));
        assert_eq!(one(x, &c), Action::TypeInInput(x));
        let input = ctx(Focus::Input);
        for ch in ['p', 'y', 'q', 'g', 'G', '?'] {
            let k = key(KeyCode::Char(ch));
            assert_eq!(one(k, &input), Action::Edit(k), "{ch}");
        }
    }

    #[test]
    fn q_quits_only_with_an_empty_input() {
        let mut c = ctx(Focus::Conversation);
        c.input_empty = false;
        assert_eq!(one(key(KeyCode::Char('q')), &c), Action::FocusInput);
        c.input_empty = true;
        assert_eq!(one(key(KeyCode::Char('q')), &c), Action::Quit);
    }

    #[test]
    fn ctrl_c_stops_a_turn_then_clears_then_quits() {
        let ctrl_c = with(KeyCode::Char('c'), KeyModifiers::CONTROL);
        let mut c = ctx(Focus::Input);
        c.busy = true;
        assert_eq!(one(ctrl_c, &c), Action::Interrupt);
        c.busy = false;
        c.input_empty = false;
        assert_eq!(one(ctrl_c, &c), Action::ClearInput);
        c.input_empty = true;
        assert_eq!(one(ctrl_c, &c), Action::Quit);
        let ctrl_d = with(KeyCode::Char('d'), KeyModifiers::CONTROL);
        assert_eq!(one(ctrl_d, &c), Action::Quit);
    }

    #[test]
    fn overlays_close_with_their_key_or_esc() {
        let mut c = ctx(Focus::Input);
        c.overlay = Overlay::Help;
        assert_eq!(one(key(KeyCode::Char('?')), &c), Action::CloseOverlay);
        assert_eq!(one(key(KeyCode::Esc), &c), Action::CloseOverlay);
        assert_eq!(one(key(KeyCode::Char('x')), &c), Action::None);
        c.overlay = Overlay::Panels;
        assert_eq!(one(key(KeyCode::Char('p')), &c), Action::CloseOverlay);
        assert_eq!(one(key(KeyCode::Char('y')), &c), Action::Yank);
    }
}
