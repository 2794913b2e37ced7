//! Money as exact decimals: a whole number of 10^-18 units in an `i128`. Prices are parsed
//! from their text (`"2.50"`, or a JSON number such as `2.5e-06`, as written), never
//! through a binary float, so `2.5e-06` is exactly 0.0000025 and a sum of lines is exactly
//! the total.

use std::fmt;

/// Decimal places kept.
const SCALE: u32 = 18;
const ONE: i128 = 10i128.pow(SCALE);

/// An exact decimal amount (a price, or a line's or a total's money).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount(i128);

/// Why a text is not an amount.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    /// Not a decimal number.
    #[error("`{0}` is not a decimal number")]
    Malformed(String),
    /// More than 18 decimal places, or too large.
    #[error("`{0}` does not fit 18 decimal places")]
    OutOfRange(String),
}

impl Amount {
    /// Zero.
    pub const ZERO: Self = Self(0);

    /// The amount a decimal text says: digits with an optional sign, point and exponent
    /// (`12`, `-0.5`, `2.5e-06`, `1E3`), exactly.
    pub fn parse(text: &str) -> Result<Self, AmountError> {
        let malformed = || AmountError::Malformed(text.to_owned());
        let out_of_range = || AmountError::OutOfRange(text.to_owned());
        let (negative, body) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (mantissa, exponent) = match body.find(['e', 'E']) {
            Some(at) => {
                let exponent = &body[at + 1..];
                let digits = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(malformed());
                }
                // Well formed, but beyond any amount: out of range rather than malformed.
                let exponent: i64 = exponent.parse().map_err(|_| out_of_range())?;
                (&body[..at], exponent)
            }
            None => (body, 0),
        };
        let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        let all_digits = whole
            .bytes()
            .chain(fraction.bytes())
            .all(|b| b.is_ascii_digit());
        if whole.is_empty() && fraction.is_empty() || !all_digits {
            return Err(malformed());
        }
        // Trailing zeros of the fraction change nothing; zero is zero at any exponent.
        let fraction = fraction.trim_end_matches('0');
        let digits = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        if digits.is_empty() {
            return Ok(Self::ZERO);
        }
        // The value is digits * 10^(exponent - fraction digits); scaled by 10^18.
        let shift = i64::try_from(fraction.len())
            .ok()
            .and_then(|places| exponent.checked_sub(places))
            .and_then(|shift| shift.checked_add(i64::from(SCALE)))
            .ok_or_else(out_of_range)?;
        let mut value: i128 = 0;
        for digit in digits.bytes() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(i128::from(digit - b'0')))
                .ok_or_else(out_of_range)?;
        }
        let power = |shift: i64| {
            u32::try_from(shift.unsigned_abs())
                .ok()
                .and_then(|s| 10i128.checked_pow(s))
                .ok_or_else(out_of_range)
        };
        if shift >= 0 {
            value = value.checked_mul(power(shift)?).ok_or_else(out_of_range)?;
        } else {
            // Digits past the 18th place (not zeros, those are gone) would be rounded away.
            let divisor = power(shift)?;
            if value % divisor != 0 {
                return Err(out_of_range());
            }
            value /= divisor;
        }
        Ok(Self(if negative { -value } else { value }))
    }

    /// `self` for each of `quantity` units, exactly; `None` past what an amount holds.
    pub fn times(self, quantity: u64) -> Option<Self> {
        self.0.checked_mul(i128::from(quantity)).map(Self)
    }

    /// `self` divided by `per` (a price given per `per` units), exactly; `None` when it
    /// does not divide to 18 decimal places.
    pub fn per(self, per: u64) -> Option<Self> {
        let per = i128::from(per);
        (per != 0 && self.0 % per == 0).then(|| Self(self.0 / per))
    }

    /// Whether it is below zero.
    pub fn is_negative(self) -> bool {
        self.0 < 0
    }

    /// `self + other`; `None` past what an amount holds.
    pub fn checked_add(self, other: Self) -> Option<Self> {
        self.0.checked_add(other.0).map(Self)
    }

    /// `self - other`; `None` past what an amount holds.
    pub fn checked_sub(self, other: Self) -> Option<Self> {
        self.0.checked_sub(other.0).map(Self)
    }
}

/// The shortest exact decimal: `2.5`, `0.0000025`, `-3`, `0`.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let magnitude = self.0.unsigned_abs();
        let one = ONE.unsigned_abs();
        let (whole, fraction) = (magnitude / one, magnitude % one);
        if fraction == 0 {
            return write!(f, "{sign}{whole}");
        }
        let fraction = format!("{fraction:018}");
        write!(f, "{sign}{whole}.{}", fraction.trim_end_matches('0'))
    }
}

impl serde::Serialize for Amount {
    /// As its decimal text: JSON readers that parse numbers as floats would round it.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn decimal_and_scientific_texts_are_read_exactly() {
        for (text, shown) in [
            ("2.50", "2.5"),
            ("2.5e-06", "0.0000025"),
            ("2.5E-6", "0.0000025"),
            ("3e-07", "0.0000003"),
            ("1.25e-07", "0.000000125"),
            ("0.00001", "0.00001"),
            ("15", "15"),
            ("1e3", "1000"),
            ("-0.5", "-0.5"),
            ("0", "0"),
            ("0.0", "0"),
            (".5", "0.5"),
            ("1.000000000000000001", "1.000000000000000001"),
        ] {
            assert_eq!(Amount::parse(text).unwrap().to_string(), shown, "{text}");
        }
        for text in [
            "", ".", "abc", "1.2.3", "1e", "e5", "--1", "1,5", " 2.5", "1e+", "1e1.5",
        ] {
            assert!(
                matches!(Amount::parse(text), Err(AmountError::Malformed(_))),
                "{text}"
            );
        }
        for text in [
            "1e-19",
            "0.0000000000000000001",
            "1e40",
            "1e99999999999999999999",
        ] {
            assert!(
                matches!(Amount::parse(text), Err(AmountError::OutOfRange(_))),
                "{text}"
            );
        }
        // Zeros past the 18th place round nothing away; zero is zero at any exponent.
        assert_eq!(
            Amount::parse("1.5000000000000000000000")
                .unwrap()
                .to_string(),
            "1.5"
        );
        let many_zeros = format!("1.{}", "0".repeat(40));
        assert_eq!(Amount::parse(&many_zeros).unwrap().to_string(), "1");
        assert_eq!(Amount::parse("0e400").unwrap(), Amount::ZERO);
        assert_eq!(Amount::parse("0.000e-999").unwrap(), Amount::ZERO);
    }

    #[test]
    fn per_and_times_are_exact() {
        let per_million = Amount::parse("2.50").unwrap().per(1_000_000).unwrap();
        assert_eq!(per_million.to_string(), "0.0000025");
        assert_eq!(per_million.times(1_234).unwrap().to_string(), "0.003085");
        assert_eq!(Amount::parse("1").unwrap().per(3), None, "not exact");
        assert_eq!(
            Amount::parse("1")
                .unwrap()
                .times(u64::MAX)
                .map(|a| a > Amount::ZERO),
            Some(true)
        );
    }

    proptest! {
        #[test]
        fn the_text_of_an_amount_reads_back_as_it(units in any::<i64>(), places in 0u32..=18) {
            let amount = Amount(i128::from(units) * 10i128.pow(18 - places));
            prop_assert_eq!(Amount::parse(&amount.to_string()).unwrap(), amount);
        }
    }
}
