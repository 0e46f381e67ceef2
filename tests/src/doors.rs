//! The table of doors into a shell (`docs/doors.yaml`) as the tests read it: each door, who
//! decides, and what each of five people gets through it ([`Person`]). `tests/tests/doors/`
//! walks every row on the real apiserver, and the e2e suite's doors phase the rows that need the
//! real node.

use serde::Deserialize;

/// One row.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Door {
    /// Its id (the walker's probe has the same name).
    pub door: String,
    /// How it is reached, in words.
    pub reach: String,
    /// The API resource (and subresource) it is reached through, if any.
    #[serde(default)]
    pub api: Option<String>,
    /// The gateway's or the webhook's route, if it is one.
    #[serde(default)]
    pub route: Option<String>,
    /// Which layer decides.
    pub decides: String,
    /// What the shell's owner gets.
    pub owner: String,
    /// What a user it is shared with gets.
    pub sharee: String,
    /// What a namespace editor it is not shared with gets.
    pub editor: String,
    /// What an authenticated stranger gets.
    pub stranger: String,
    /// What a pod of another namespace gets.
    pub pod: String,
    /// Which suite walks it: `api` or `node`.
    pub walked: String,
}

/// What a row says one person gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cell {
    /// Gets through.
    Yes,
    /// Refused.
    No,
    /// Not theirs to try.
    NotApplicable,
}

/// The five people of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Person {
    /// Who made the shell.
    Owner,
    /// In its `spec.sharedWith`.
    Sharee,
    /// A namespace editor it is not shared with.
    Editor,
    /// Authenticated, with no role in the namespace.
    Stranger,
    /// A pod of another namespace, with its ServiceAccount's token.
    Pod,
}

impl Person {
    /// All five, in the table's order.
    pub const ALL: [Person; 5] = [Person::Owner, Person::Sharee, Person::Editor, Person::Stranger, Person::Pod];

    /// The column's name.
    pub fn column(self) -> &'static str {
        match self {
            Person::Owner => "owner",
            Person::Sharee => "sharee",
            Person::Editor => "editor",
            Person::Stranger => "stranger",
            Person::Pod => "pod",
        }
    }
}

impl Door {
    /// What the row says `person` gets; the error names a cell that is none of `yes`, `no`,
    /// `n/a`.
    pub fn cell(&self, person: Person) -> Result<Cell, String> {
        let text = match person {
            Person::Owner => &self.owner,
            Person::Sharee => &self.sharee,
            Person::Editor => &self.editor,
            Person::Stranger => &self.stranger,
            Person::Pod => &self.pod,
        };
        match text.as_str() {
            "yes" => Ok(Cell::Yes),
            "no" => Ok(Cell::No),
            "n/a" => Ok(Cell::NotApplicable),
            other => Err(format!("door {}: {} is {other:?}, not yes, no or n/a", self.door, person.column())),
        }
    }
}

/// The table as the repository holds it.
pub fn table() -> Result<Vec<Door>, String> {
    let path = myownshell_envtest::assets::workspace_root().join("docs/doors.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let doors: Vec<Door> = serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    for door in &doors {
        for person in Person::ALL {
            door.cell(person)?;
        }
        if !["api", "node", "network"].contains(&door.walked.as_str()) {
            return Err(format!("door {}: walked is {:?}, not api, node or network", door.door, door.walked));
        }
    }
    let mut ids: Vec<&str> = doors.iter().map(|d| d.door.as_str()).collect();
    ids.sort_unstable();
    if let Some(twice) = ids.windows(2).find(|w| w[0] == w[1]) {
        return Err(format!("door {} has two rows", twice[0]));
    }
    Ok(doors)
}
