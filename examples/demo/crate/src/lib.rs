//! Roman numerals.

/// Symbols by value, largest first, subtractive forms included.
const NUMERALS: [(u32, &str); 13] = [
    (1000, "M"),
    (900, "CM"),
    (500, "D"),
    (400, "CD"),
    (100, "C"),
    (90, "XC"),
    (50, "L"),
    (40, "XL"),
    (10, "X"),
    (9, "IX"),
    (5, "V"),
    (4, "VI"),
    (1, "I"),
];

/// `n` in Roman numerals; `None` for 0 and for numbers above 3999, which need symbols
/// this crate does not write.
pub fn to_roman(mut n: u32) -> Option<String> {
    if n == 0 || n > 3999 {
        return None;
    }
    let mut out = String::new();
    for (value, symbol) in NUMERALS {
        while n >= value {
            out.push_str(symbol);
            n -= value;
        }
    }
    Some(out)
}

/// The value of a Roman numeral; `None` when it holds anything but `IVXLCDM`.
pub fn from_roman(s: &str) -> Option<u32> {
    let value = |c| match c {
        'I' => Some(1),
        'V' => Some(5),
        'X' => Some(10),
        'L' => Some(50),
        'C' => Some(100),
        'D' => Some(500),
        'M' => Some(1000),
        _ => None,
    };
    let digits: Option<Vec<u32>> = s.chars().map(value).collect();
    let digits = digits?;
    let mut total: i64 = 0;
    for (i, &d) in digits.iter().enumerate() {
        match digits.get(i + 1) {
            Some(&next) if next > d => total -= i64::from(d),
            _ => total += i64::from(d),
        }
    }
    if digits.is_empty() {
        return None;
    }
    u32::try_from(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn additive_forms() {
        assert_eq!(to_roman(3).as_deref(), Some("III"));
        assert_eq!(to_roman(8).as_deref(), Some("VIII"));
        assert_eq!(to_roman(58).as_deref(), Some("LVIII"));
        assert_eq!(to_roman(2023).as_deref(), Some("MMXXIII"));
    }

    #[test]
    fn subtractive_forms() {
        assert_eq!(to_roman(4).as_deref(), Some("IV"));
        assert_eq!(to_roman(9).as_deref(), Some("IX"));
        assert_eq!(to_roman(14).as_deref(), Some("XIV"));
        assert_eq!(to_roman(1994).as_deref(), Some("MCMXCIV"));
    }

    #[test]
    fn out_of_range() {
        assert_eq!(to_roman(0), None);
        assert_eq!(to_roman(4000), None);
    }

    #[test]
    fn parses_what_it_writes() {
        for n in [1, 3, 10, 40, 58, 90, 400, 1000, 3999] {
            let s = to_roman(n).unwrap();
            assert_eq!(from_roman(&s), Some(n), "{s}");
        }
    }
}
