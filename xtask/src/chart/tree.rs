//! A manifest with Helm template actions in it: the rendered objects of `config/` (JSON), with
//! some scalars computed by an action and some entries, items or values present only when a
//! condition holds. `emit.rs` writes it as YAML.

use serde_json::Value;

/// A value of a template.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Null,
    Bool(bool),
    Number(serde_json::Number),
    /// A literal string.
    Str(String),
    /// A string made of literal text and action output, e.g. `"{{ .Release.Namespace }}/x"`.
    Text(Vec<Piece>),
    /// A scalar that is the output of one action, written bare (`replicas: {{ .Values.x }}`).
    Expr(String),
    Map(Vec<Entry>),
    Seq(Vec<Item>),
    /// `then` when the condition holds, else `otherwise`.
    Choice {
        when: String,
        then: Box<Node>,
        otherwise: Box<Node>,
    },
}

/// A part of a [`Node::Text`].
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Lit(String),
    /// The pipeline of an action, without the braces: `.Release.Namespace`.
    Action(String),
}

/// A mapping entry, present only when `when` holds (always if `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub key: String,
    pub value: Node,
    pub when: Option<String>,
}

/// A sequence item, present only when `when` holds (always if `None`).
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub value: Node,
    pub when: Option<String>,
}

impl Node {
    /// The same value, with no actions.
    pub fn from_json(value: &Value) -> Node {
        match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => Node::Number(n.clone()),
            Value::String(s) => Node::Str(s.clone()),
            Value::Array(items) => {
                Node::Seq(items.iter().map(|v| Item { value: Node::from_json(v), when: None }).collect())
            }
            Value::Object(map) => {
                let mut entries: Vec<Entry> =
                    map.iter().map(|(k, v)| Entry { key: k.clone(), value: Node::from_json(v), when: None }).collect();
                sort(&mut entries);
                Node::Map(entries)
            }
        }
    }

    /// The unconditional entry `key` of a mapping.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        match self {
            Node::Map(entries) => entries.iter_mut().find(|e| e.key == key && e.when.is_none()).map(|e| &mut e.value),
            _ => None,
        }
    }

    /// Follow unconditional entries along `path`.
    pub fn at_mut(&mut self, path: &[&str]) -> Option<&mut Node> {
        path.iter().try_fold(self, |node, key| node.get_mut(key))
    }

    /// Apply `f` to every node, parents before children, the branches of a choice included.
    pub fn walk_mut(&mut self, f: &mut impl FnMut(&mut Node)) {
        f(self);
        match self {
            Node::Map(entries) => entries.iter_mut().for_each(|e| e.value.walk_mut(f)),
            Node::Seq(items) => items.iter_mut().for_each(|i| i.value.walk_mut(f)),
            Node::Choice { then, otherwise, .. } => {
                then.walk_mut(f);
                otherwise.walk_mut(f);
            }
            _ => {}
        }
    }
}

/// Keys in byte order, as kustomize writes them: the same text whatever order serde_json keeps
/// (its `preserve_order` feature may be on in one build and off in another).
pub fn sort(entries: &mut [Entry]) {
    entries.sort_by(|a, b| a.key.cmp(&b.key));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_only_unconditional_entries() {
        let mut node = Node::from_json(&serde_json::json!({"spec": {"replicas": 1}}));
        assert_eq!(node.at_mut(&["spec", "replicas"]), Some(&mut Node::Number(1.into())));
        if let Node::Map(entries) = &mut node {
            entries[0].when = Some("x".into());
        }
        assert_eq!(node.at_mut(&["spec", "replicas"]), None);
    }
}
