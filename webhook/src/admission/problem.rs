//! One rule a spec breaks, as the validating webhook reports it.

/// One rule a spec breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `spec.size`, `spec.resources.limits[cpu]`, …
    pub field: String,
    /// Which spec field it belongs to (for update ratcheting): `size`, `image`, `command`,
    /// `resources`.
    pub top: &'static str,
    /// The rule and the value, e.g. `must be between 0 and 50, got 500`.
    pub message: String,
    /// Whether a shell class's rule found it (those hold again at every start).
    pub of_class: bool,
}

impl Problem {
    /// A problem of `field`, under the top-level spec field `top`.
    pub fn new(top: &'static str, field: impl Into<String>, message: String) -> Self {
        Self { field: field.into(), top, message, of_class: false }
    }

    /// The same problem, found by a class's rule.
    pub fn of_class(self) -> Self {
        Self { of_class: true, ..self }
    }
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}
