//! Unguessable ids for sessions, CSRF tokens and terminals: 32 bytes from the operating
//! system's random source, as 64 hexadecimal characters.

/// A new id, or why the OS gave no randomness.
pub fn random() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| e.to_string())?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they first differ
/// (for comparing a CSRF token a request sent with the session's).
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_long_and_differ() {
        let (a, b) = (random().expect("random"), random().expect("random"));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &b));
        assert!(!same(&a, &a[..63]));
    }
}
