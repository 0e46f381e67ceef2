//! One template for two renders of an object: `config/default` (the base) and an overlay of it
//! (the alternative, e.g. `config/overlays/cert-manager`). What both have is written once; where
//! they differ, a condition picks. Rendering the result with either condition true gives back
//! exactly that render: entries and items keep their values, and the sequences their order.

use serde_json::{Map, Value};

use super::tree::{Entry, Item, Node, sort};

/// The two conditions: `alt` holds when the overlay applies, `base` when it does not.
pub struct Switch<'a> {
    pub alt: &'a str,
    pub base: &'a str,
}

/// `base` and `alt` as one node.
pub fn merge(base: &Value, alt: &Value, switch: &Switch) -> Node {
    if base == alt {
        return Node::from_json(base);
    }
    match (base, alt) {
        (Value::Object(b), Value::Object(a)) => merge_maps(b, a, switch),
        (Value::Array(b), Value::Array(a)) => merge_seqs(b, a, switch),
        _ => Node::Choice {
            when: switch.alt.to_owned(),
            then: Box::new(Node::from_json(alt)),
            otherwise: Box::new(Node::from_json(base)),
        },
    }
}

/// Keys of both are merged; a key of one only is there under its condition.
fn merge_maps(base: &Map<String, Value>, alt: &Map<String, Value>, switch: &Switch) -> Node {
    let mut entries = Vec::new();
    for (key, b) in base {
        let (value, when) = match alt.get(key) {
            Some(a) => (merge(b, a, switch), None),
            None => (Node::from_json(b), Some(switch.base.to_owned())),
        };
        entries.push(Entry { key: key.clone(), value, when });
    }
    for (key, a) in alt.iter().filter(|(k, _)| !base.contains_key(*k)) {
        entries.push(Entry { key: key.clone(), value: Node::from_json(a), when: Some(switch.alt.to_owned()) });
    }
    sort(&mut entries);
    Node::Map(entries)
}

/// Items are paired along a longest common subsequence of their identities (the `name` of a
/// named item, as a strategic merge pairs containers, volumes and ports; else the whole value);
/// paired items are merged, the others are there under their condition, in place.
fn merge_seqs(base: &[Value], alt: &[Value], switch: &Switch) -> Node {
    let pairs = common_subsequence(&identities(base), &identities(alt));
    let mut items = Vec::new();
    let (mut i, mut j) = (0, 0);
    for (pi, pj) in pairs.into_iter().chain([(base.len(), alt.len())]) {
        items
            .extend(base[i..pi].iter().map(|v| Item { value: Node::from_json(v), when: Some(switch.base.to_owned()) }));
        items.extend(alt[j..pj].iter().map(|v| Item { value: Node::from_json(v), when: Some(switch.alt.to_owned()) }));
        if pi < base.len() {
            items.push(Item { value: merge(&base[pi], &alt[pj], switch), when: None });
        }
        (i, j) = (pi + 1, pj + 1);
    }
    Node::Seq(items)
}

fn identities(items: &[Value]) -> Vec<&Value> {
    items.iter().map(|v| v.get("name").filter(|n| n.is_string()).unwrap_or(v)).collect()
}

/// Index pairs of a longest common subsequence, in order.
fn common_subsequence<T: PartialEq>(a: &[T], b: &[T]) -> Vec<(usize, usize)> {
    // lengths[i][j]: the LCS length of a[i..] and b[j..].
    let mut lengths = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lengths[i][j] =
                if a[i] == b[j] { lengths[i + 1][j + 1] + 1 } else { lengths[i + 1][j].max(lengths[i][j + 1]) };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            pairs.push((i, j));
            (i, j) = (i + 1, j + 1);
        } else if lengths[i + 1][j] >= lengths[i][j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const SWITCH: Switch = Switch { alt: "alt", base: "base" };

    fn when(items: &Node) -> Vec<Option<&str>> {
        match items {
            Node::Seq(items) => items.iter().map(|i| i.when.as_deref()).collect(),
            Node::Map(entries) => entries.iter().map(|e| e.when.as_deref()).collect(),
            _ => vec![],
        }
    }

    #[test]
    fn equal_values_need_no_condition() {
        let v = json!({"a": [1, 2], "b": "x"});
        assert_eq!(merge(&v, &v, &SWITCH), Node::from_json(&v));
    }

    #[test]
    fn added_arguments_are_conditional_items_in_place() {
        let node = merge(&json!(["a", "b", "c"]), &json!(["a", "x", "b", "c", "y"]), &SWITCH);
        assert_eq!(when(&node), [None, Some("alt"), None, None, Some("alt")]);
    }

    #[test]
    fn named_items_are_merged_by_name() {
        let base = json!([{"name": "c", "args": ["a"]}]);
        let alt = json!([{"name": "c", "args": ["a", "b"], "volumeMounts": []}]);
        let Node::Seq(items) = merge(&base, &alt, &SWITCH) else { panic!("not a sequence") };
        assert_eq!(items.len(), 1);
        assert_eq!(when(&items[0].value), [None, None, Some("alt")]);
    }

    #[test]
    fn different_scalars_become_a_choice() {
        let node = merge(&json!({"k": 1}), &json!({"k": "x", "added": true}), &SWITCH);
        let Node::Map(entries) = &node else { panic!("not a map") };
        assert!(matches!(&entries[1].value, Node::Choice { when, .. } if when == "alt"));
        assert_eq!(when(&node), [Some("alt"), None]);
        let node = merge(&json!({"only": 1}), &json!({}), &SWITCH);
        assert_eq!(when(&node), [Some("base")]);
    }
}
