//! The README's table of doors (`<!-- doors:start/end -->`), made from `docs/doors.yaml`: every
//! way into a shell, who decides, and what each of the five people of the table gets. The rows
//! themselves are walked by `tests/tests/doors/`; this only writes them out for readers.

use serde::Deserialize;

/// What the table shows of a row (the file has more, for the walker).
#[derive(Deserialize)]
struct Door {
    door: String,
    reach: String,
    #[serde(default)]
    api: Option<String>,
    #[serde(default)]
    route: Option<String>,
    decides: String,
    owner: String,
    sharee: String,
    editor: String,
    stranger: String,
    pod: String,
    walked: String,
}

/// The rows of `yaml` as a Markdown table.
pub fn table(yaml: &str) -> Result<String, String> {
    let doors: Vec<Door> = serde_saphyr::from_str(yaml).map_err(|e| format!("docs/doors.yaml: {e}"))?;
    let mut out = String::from(
        "| door | how | decides | owner | sharee | editor | stranger | pod |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for d in doors {
        let through = d.api.as_deref().or(d.route.as_deref()).map(|a| format!(" (`{a}`)")).unwrap_or_default();
        let walked = match d.walked.as_str() {
            "node" => " *(node)*",
            "network" => " *(network)*",
            _ => "",
        };
        let cells = [&d.owner, &d.sharee, &d.editor, &d.stranger, &d.pod].map(|c| cell(c));
        out.push_str(&format!(
            "| `{}`{walked} | {}{through} | {} | {} |\n",
            d.door,
            d.reach.replace('|', "\\\\|"),
            d.decides.replace('|', "\\\\|"),
            cells.join(" | ")
        ));
    }
    Ok(out)
}

fn cell(value: &str) -> &str {
    match value {
        "yes" => "**yes**",
        "no" => "no",
        _ => "–",
    }
}
