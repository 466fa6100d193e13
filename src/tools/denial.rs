//! How the kernel's denials reach the model: one line per distinct denial, with the policy's
//! reason, led by `denied by policy:`.

use bee_userspace::audit::{AuditRecord, lost_records_explanation};

use super::ToolState;

/// True for `EACCES` and `EPERM`, the errors a denial produces.
pub fn is_permission_errno(errno: i32) -> bool {
    errno == libc::EACCES || errno == libc::EPERM
}

/// One line per distinct denial, in the order first seen, e.g. `denied by policy: open
/// /home/u/.ssh/id_rsa for read: no fs.read grant covers it`; a repeated denial ends in
/// `(3 times)`.
pub fn denial_lines(denials: &[AuditRecord]) -> Vec<String> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    for record in denials {
        let line = record.explanation();
        match seen.iter_mut().find(|(l, _)| *l == line) {
            Some((_, n)) => *n += 1,
            None => seen.push((line, 1)),
        }
    }
    seen.into_iter()
        .map(|(line, n)| {
            if n > 1 {
                format!("denied by policy: {line} ({n} times)")
            } else {
                format!("denied by policy: {line}")
            }
        })
        .collect()
}

/// The model's text for an answer: the state's prefix and the body, with the denials leading
/// when they explain a failure (`lead`) and following as a note otherwise.
pub(crate) fn render(state: ToolState, body: &str, denials: &[AuditRecord], lead: bool) -> String {
    let prefix = match state {
        ToolState::Completed => "",
        ToolState::Failed => "failed: ",
        ToolState::CouldNotRun => "could not run: ",
    };
    let main = format!("{prefix}{body}");
    if denials.is_empty() {
        return main;
    }
    let lines = denial_lines(denials).join("\n");
    if lead && state != ToolState::Completed {
        format!("{lines}\n{main}")
    } else {
        let n = denials.len();
        let noun = if n == 1 { "access" } else { "accesses" };
        format!(
            "{}\n\nnote: the policy denied {n} {noun} during this call:\n{lines}",
            main.trim_end()
        )
    }
}

/// `content` with a note, when `lost` of the kernel's audit records were lost during the call
/// (`Sandbox::take_lost_records`), that its denials may be incomplete: the sentence `bee exec`
/// prints ([`lost_records_explanation`]). `content` as it is when none was lost.
pub fn with_lost_records(content: String, lost: u64) -> String {
    if lost == 0 {
        return content;
    }
    format!(
        "{}\n\nnote: {}",
        content.trim_end(),
        lost_records_explanation(lost)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_records_are_noted_after_the_content_and_only_then() {
        assert_eq!(with_lost_records("out\n".to_owned(), 0), "out\n");
        assert_eq!(
            with_lost_records("out\n".to_owned(), 3),
            "out\n\nnote: some denials may be missing: the kernel dropped 3 audit records while \
             this scope ran (its audit queue, bee's socket or a ring buffer of bee's programs was full)"
        );
    }
}
