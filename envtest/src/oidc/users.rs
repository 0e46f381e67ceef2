//! The test bed's people: who may sign in at the login page, with what password, and the groups
//! and e-mail the ID token then says they have. Fixed and public, so a test names a person and
//! knows what Kubernetes must make of them.

/// One person of the test bed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct User {
    /// The login name, and the ID token's `sub` and `preferred_username`.
    pub name: &'static str,
    /// The password the login page accepts (test bed only; never a real secret).
    pub password: &'static str,
    /// The ID token's `email` (verified, as an organisation's directory would say).
    pub email: &'static str,
    /// The ID token's `groups`.
    pub groups: &'static [&'static str],
}

/// The group every test bed user is in.
pub const USERS_GROUP: &str = "myownshell:users";
/// bob's second group.
pub const ADMINS_GROUP: &str = "admins";

/// alice: an ordinary user.
pub const ALICE: User =
    User { name: "alice", password: "alice-password", email: "alice@example.test", groups: &[USERS_GROUP] };
/// bob: a user who is also an administrator.
pub const BOB: User =
    User { name: "bob", password: "bob-password", email: "bob@example.test", groups: &[USERS_GROUP, ADMINS_GROUP] };
/// Everyone who may sign in.
pub const USERS: [User; 2] = [ALICE, BOB];

/// What the login page says to a wrong name or password: the same sentence for both, so that the
/// page does not tell a stranger which names exist.
pub const REFUSED: &str = "The user name or the password is wrong.";

/// The user `name` is, if `password` is theirs.
pub fn check(name: &str, password: &str) -> Option<&'static User> {
    // Every user's password is compared, so the time taken does not tell which names exist.
    USERS.iter().fold(None, |found, user| {
        let matches = constant_time_eq(user.name.as_bytes(), name.as_bytes())
            & constant_time_eq(user.password.as_bytes(), password.as_bytes());
        if matches { Some(user) } else { found }
    })
}

/// The user called `name` (the ID token's subject at consent).
pub fn find(name: &str) -> Option<&'static User> {
    USERS.iter().find(|u| u.name == name)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_right_password_of_a_known_user_signs_in() {
        let cases = [
            ("alice", "alice-password", Some("alice")),
            ("bob", "bob-password", Some("bob")),
            ("alice", "bob-password", None),
            ("alice", "", None),
            ("mallory", "alice-password", None),
            ("", "", None),
        ];
        for (name, password, expected) in cases {
            assert_eq!(check(name, password).map(|u| u.name), expected, "{name}/{password}");
        }
    }
}
