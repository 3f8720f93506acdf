//! Maps field paths like `clusters[0].servers[1].weight` to their line and column.
//!
//! serde_yaml keeps no positions in its value tree, so the text is walked once more with
//! yaml-rust2's event parser, which marks every node. Only used when there are errors.

use std::collections::HashMap;
use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser};
use yaml_rust2::scanner::Marker;

/// Positions of every key and list item in a YAML document.
#[derive(Default)]
pub struct Positions(HashMap<String, (usize, usize)>);

enum Frame {
    /// A mapping: the path of the mapping, and the key whose value comes next (if any).
    Map { path: String, key: Option<String> },
    /// A sequence: the path of the sequence and the index of the next item.
    Seq { path: String, next: usize },
}

#[derive(Default)]
struct Walker {
    stack: Vec<Frame>,
    found: HashMap<String, (usize, usize)>,
}

impl Walker {
    /// The path of the node that starts now, advancing the parent's state.
    /// Returns `None` when the node is a mapping key (recorded by the caller).
    fn next_node_path(&mut self) -> Option<String> {
        match self.stack.last_mut() {
            None => Some(String::new()),
            Some(Frame::Seq { path, next }) => {
                let p = format!("{path}[{next}]");
                *next += 1;
                Some(p)
            }
            Some(Frame::Map { path, key }) => key.take().map(|k| join(path, &k)),
        }
    }

    fn record(&mut self, path: &str, mark: Marker) {
        self.found
            .entry(path.to_string())
            .or_insert((mark.line(), mark.col() + 1));
    }
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

impl MarkedEventReceiver for Walker {
    fn on_event(&mut self, ev: Event, mark: Marker) {
        match ev {
            Event::Scalar(value, ..) => {
                let is_key = matches!(self.stack.last(), Some(Frame::Map { key: None, .. }));
                if is_key {
                    if let Some(Frame::Map { path, key }) = self.stack.last_mut() {
                        let full = join(path, &value);
                        *key = Some(value);
                        self.record(&full, mark);
                    }
                } else if let Some(path) = self.next_node_path() {
                    self.record(&path, mark);
                }
            }
            Event::MappingStart(..) => {
                let path = self.next_node_path().unwrap_or_default();
                self.record(&path, mark);
                self.stack.push(Frame::Map { path, key: None });
            }
            Event::SequenceStart(..) => {
                let path = self.next_node_path().unwrap_or_default();
                self.record(&path, mark);
                self.stack.push(Frame::Seq { path, next: 0 });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                self.stack.pop();
            }
            Event::Alias(_) => {
                self.next_node_path();
            }
            _ => {}
        }
    }
}

impl Positions {
    /// Indexes `text`; a document that does not parse yields an empty index.
    pub fn index(text: &str) -> Positions {
        let mut walker = Walker::default();
        let mut parser = Parser::new_from_str(text);
        if parser.load(&mut walker, false).is_err() {
            return Positions::default();
        }
        Positions(walker.found)
    }

    /// Position of `path`, or of its nearest ancestor that is in the file.
    pub fn find(&self, path: &str) -> Option<(usize, usize)> {
        let mut p = path;
        loop {
            if let Some(pos) = self.0.get(p) {
                return Some(*pos);
            }
            let cut = p.rfind(['.', '['])?;
            p = &p[..cut];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_items_and_flow_mappings() {
        let text = "listeners:\n  - name: web\n    address: 1.2.3.4:80\nclusters:\n  - name: shop\n    servers:\n      - { name: n1, weight: 0 }\n";
        let pos = Positions::index(text);
        assert_eq!(pos.find("listeners[0].address"), Some((3, 5)));
        assert_eq!(pos.find("clusters[0].servers[0].weight"), Some((7, 21)));
        assert_eq!(pos.find("clusters[0].servers[0]"), Some((7, 9)));
        // A missing field points at its nearest parent.
        assert_eq!(pos.find("clusters[0].servers[0].route"), Some((7, 9)));
        assert_eq!(pos.find("nothing.here"), None);
    }
}
