//! A [`Node`] as the text of a Helm template: block-style YAML with `{{- if }}` lines around
//! what is conditional. The `{{-` trims the line break before it, so a condition's lines leave
//! nothing behind, and what Helm renders is the YAML of the chosen values. Literal text never
//! reaches Go's template engine as code: a `{{` in it is written as `{{ "{{" }}`.

use super::tree::{Entry, Item, Node, Piece};

/// `node` (a mapping) as a YAML document, one trailing line break.
pub fn document(node: &Node) -> String {
    let mut out = Out::default();
    out.block(node, 0);
    out.text
}

/// A scalar as it stands after `key: ` or `- `, if it fits there.
pub fn inline(node: &Node) -> Option<String> {
    Some(match node {
        Node::Null => "null".to_owned(),
        Node::Bool(b) => b.to_string(),
        Node::Number(n) => n.to_string(),
        Node::Str(s) if !s.contains('\n') && plain(s) => s.clone(),
        Node::Str(s) => quoted(&[Piece::Lit(s.clone())]),
        Node::Text(pieces) => quoted(pieces),
        Node::Expr(pipeline) => format!("{{{{ {pipeline} }}}}"),
        Node::Map(entries) if entries.is_empty() => "{}".to_owned(),
        Node::Seq(items) if items.is_empty() => "[]".to_owned(),
        Node::Map(_) | Node::Seq(_) | Node::Choice { .. } => return None,
    })
}

/// A key as YAML.
pub fn key(k: &str) -> String {
    if plain(k) { k.to_owned() } else { quoted(&[Piece::Lit(k.to_owned())]) }
}

/// Literal text for the template engine: `{{` would start an action.
fn escape_template(s: &str) -> String {
    s.replace("{{", "{{ \"{{\" }}")
}

/// A double-quoted YAML string (JSON's escapes are YAML's), actions spliced in.
fn quoted(pieces: &[Piece]) -> String {
    let mut out = String::from("\"");
    for piece in pieces {
        match piece {
            Piece::Lit(s) => {
                let json = serde_json::Value::String(s.clone()).to_string();
                out.push_str(&escape_template(&json[1..json.len() - 1]));
            }
            Piece::Action(pipeline) => out.push_str(&format!("{{{{ {pipeline} }}}}")),
        }
    }
    out.push('"');
    out
}

/// Whether `s` reads back as this same string when written bare. Conservative: anything that
/// could be another type, an indicator or a comment is quoted.
fn plain(s: &str) -> bool {
    const SPECIAL: [&str; 12] = ["y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<", "="];
    let Some(first) = s.chars().next() else { return false };
    let starts_well = first.is_ascii_alphabetic()
        || first == '/'
        || (first == '-' && s[1..].starts_with(|c: char| c.is_ascii_alphabetic() || c == '-'));
    let chars_ok = s.chars().all(|c| c.is_ascii_alphanumeric() || " -._/:=@+,".contains(c));
    starts_well
        && chars_ok
        && !s.ends_with([' ', ':'])
        && !s.contains(": ")
        && !SPECIAL.iter().any(|w| s.eq_ignore_ascii_case(w))
}

/// A string written as a literal block (`|-`, or `|` for one final line break): the lines
/// after the header, or `None` if it must be quoted instead.
fn literal(s: &str) -> Option<(&'static str, Vec<&str>)> {
    let (header, body) = match s.strip_suffix('\n') {
        Some(body) if !body.ends_with('\n') => ("|", body),
        Some(_) => return None,
        None => ("|-", s),
    };
    let printable = s.chars().all(|c| c == '\n' || !c.is_control());
    let lines: Vec<&str> = body.split('\n').collect();
    // A line of spaces alone would read back as an empty line.
    let blank_kept = lines.iter().all(|l| l.is_empty() || !l.trim().is_empty());
    (printable && blank_kept && s.contains('\n') && !body.starts_with([' ', '\n'])).then_some((header, lines))
}

#[derive(Default)]
struct Out {
    text: String,
}

impl Out {
    fn line(&mut self, indent: usize, s: &str) {
        if s.is_empty() {
            self.text.push('\n');
        } else {
            self.text.push_str(&format!("{:indent$}{s}\n", ""));
        }
    }

    fn directive(&mut self, indent: usize, action: &str) {
        self.line(indent, &format!("{{{{- {action} }}}}"));
    }

    /// A mapping, sequence or choice whose lines start at `indent`.
    fn block(&mut self, node: &Node, indent: usize) {
        match node {
            Node::Map(entries) if !entries.is_empty() => self.grouped(entries, indent, |e| &e.when, Self::entry),
            Node::Seq(items) if !items.is_empty() => self.grouped(items, indent, |i| &i.when, Self::item),
            Node::Choice { when, then, otherwise } => {
                self.directive(indent, &format!("if {when}"));
                self.block(then, indent);
                self.directive(indent, "else");
                self.block(otherwise, indent);
                self.directive(indent, "end");
            }
            // A scalar as a block of its own: the value of a key, on the next line.
            scalar => {
                let text = inline(scalar).unwrap_or_default();
                self.line(indent, &text);
            }
        }
    }

    /// Entries or items in order, one `if` around each run with the same condition.
    fn grouped<T>(
        &mut self,
        parts: &[T],
        indent: usize,
        when: impl Fn(&T) -> &Option<String>,
        write: impl Fn(&mut Self, &T, usize),
    ) {
        let mut open: Option<&String> = None;
        for part in parts {
            let condition = when(part).as_ref();
            if condition != open {
                if open.is_some() {
                    self.directive(indent, "end");
                }
                if let Some(c) = condition {
                    self.directive(indent, &format!("if {c}"));
                }
                open = condition;
            }
            write(self, part, indent);
        }
        if open.is_some() {
            self.directive(indent, "end");
        }
    }

    fn entry(&mut self, entry: &Entry, indent: usize) {
        let k = key(&entry.key);
        if let Node::Str(s) = &entry.value
            && let Some((header, lines)) = literal(s)
        {
            self.line(indent, &format!("{k}: {header}"));
            lines.iter().for_each(|l| self.line(indent + 2, &escape_template(l)));
        } else if let Some(text) = inline(&entry.value) {
            self.line(indent, &format!("{k}: {text}"));
        } else {
            self.line(indent, &format!("{k}:"));
            self.block(&entry.value, indent + 2);
        }
    }

    fn item(&mut self, item: &Item, indent: usize) {
        if let Node::Str(s) = &item.value
            && let Some((header, lines)) = literal(s)
        {
            self.line(indent, &format!("- {header}"));
            lines.iter().for_each(|l| self.line(indent + 2, &escape_template(l)));
        } else if let Some(text) = inline(&item.value) {
            self.line(indent, &format!("- {text}"));
        } else {
            // The item's first line goes after the dash when it is an entry, not a directive.
            let mut nested = Out::default();
            nested.block(&item.value, indent + 2);
            let first_is_entry = nested.text.get(indent + 2..).is_some_and(|rest| !rest.starts_with("{{"));
            if first_is_entry {
                self.text.push_str(&format!("{:indent$}- {}", "", &nested.text[indent + 2..]));
            } else {
                self.line(indent, "-");
                self.text.push_str(&nested.text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn scalars_are_quoted_unless_they_read_back_the_same() {
        for s in ["--leader-elect", "ghcr.io/x/y:0.1.0", "app.kubernetes.io/name", "/metrics", "a b"] {
            assert!(plain(s), "{s}");
        }
        for s in ["", "true", "No", "1", "0.1.0", "-1", "a: b", "a #b", "a:", "*x", "{x}", " x", "x ", "@x", "~"] {
            assert!(!plain(s), "{s}");
        }
        assert_eq!(inline(&Node::Str("a{{b".into())).unwrap(), r#""a{{ "{{" }}b""#);
        assert_eq!(inline(&Node::Str("say \"hi\"".into())).unwrap(), r#""say \"hi\"""#);
    }

    #[test]
    fn a_document_with_conditions() {
        let mut node = Node::from_json(&json!({"a": {"b": [1, {"c": "x", "d": []}]}, "e": "two\nlines"}));
        if let Some(Node::Seq(items)) = node.at_mut(&["a", "b"]) {
            items[0].when = Some("cond".into());
            items.push(Item { value: Node::Expr(".Values.x".into()), when: Some("cond".into()) });
        }
        let text = document(&node);
        assert_eq!(
            text,
            "a:\n  b:\n    {{- if cond }}\n    - 1\n    {{- end }}\n    - c: x\n      d: []\n    {{- if cond }}\n    - {{ .Values.x }}\n    {{- end }}\ne: |-\n  two\n  lines\n"
        );
    }

    #[test]
    fn a_choice_between_blocks() {
        let node = Node::Map(vec![Entry {
            key: "args".into(),
            value: Node::Choice {
                when: "c".into(),
                then: Box::new(Node::from_json(&json!(["a"]))),
                otherwise: Box::new(Node::from_json(&json!({"k": "v"}))),
            },
            when: None,
        }]);
        assert_eq!(document(&node), "args:\n  {{- if c }}\n  - a\n  {{- else }}\n  k: v\n  {{- end }}\n");
    }
}
