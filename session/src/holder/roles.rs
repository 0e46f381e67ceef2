//! Who may do what in a session: a pure decision. The holder trusts the user a client names
//! (whoever reaches its socket already got into the shell's container; the gateway names the
//! user it authenticated), so these rules keep people who share a session from stepping on each
//! other, not strangers out.

/// A client's standing in a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// Its user created the session.
    pub creator: bool,
    /// It attached to watch.
    pub read_only: bool,
}

/// What a client asks to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Act {
    /// Input, or end of input.
    Type,
    Resize,
    /// End the session.
    End,
    /// Let others type, or stop them.
    AllowDrive,
}

/// Whether `standing` may `act` while the creator lets others drive or not; if not, the notice
/// the client gets (once).
pub fn may(standing: Standing, act: Act, others_may_drive: bool) -> Result<(), &'static str> {
    if standing.read_only {
        return Err("you are attached read-only: your input, resizes and requests to end are ignored");
    }
    match act {
        Act::AllowDrive if !standing.creator => Err("only the session's creator can let others type"),
        _ if standing.creator || others_may_drive => Ok(()),
        _ => Err("only the session's creator types here until they let others (AllowDrive); you are watching"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_may_do_what() {
        let creator = Standing { creator: true, read_only: false };
        let other = Standing { creator: false, read_only: false };
        let watching = Standing { creator: true, read_only: true };
        // (standing, act, others may drive, allowed)
        let cases = [
            (creator, Act::Type, false, true),
            (creator, Act::Resize, false, true),
            (creator, Act::End, false, true),
            (creator, Act::AllowDrive, false, true),
            (other, Act::Type, false, false),
            (other, Act::Resize, false, false),
            (other, Act::End, false, false),
            (other, Act::Type, true, true),
            (other, Act::Resize, true, true),
            (other, Act::End, true, true),
            (other, Act::AllowDrive, true, false),
            (watching, Act::Type, true, false),
            (watching, Act::Resize, true, false),
            (watching, Act::End, true, false),
            (watching, Act::AllowDrive, true, false),
        ];
        for (standing, act, others, allowed) in cases {
            assert_eq!(may(standing, act, others).is_ok(), allowed, "{standing:?} {act:?} others may drive: {others}");
        }
        assert!(may(watching, Act::Type, true).unwrap_err().contains("read-only"));
    }
}
