//! The tree builder: granit-parser's events into [`Node`]s, aliases
//! expanded, merge keys (`<<`) applied, every value typed by the YAML 1.2
//! core schema, with budgets that stop alias bombs, deep nesting and huge
//! documents at the alias, anchor or value that crosses them.
//!
//! The budgets count what the expanded document would hold, as a streaming
//! reader that replays aliases sees it: every event (aliases replayed), every
//! value, every byte of text, the nesting depth, and the events that anchors
//! still being read would keep for their own replay (an anchor inside an
//! anchor keeps a copy of everything the outer one holds: the doubling that
//! alias bombs use). An alias whose expansion crosses one is refused at the
//! alias, before anything is copied.
//!
//! The typing rules are serde-saphyr's `deserialize_any` with strict
//! booleans, which toolgate used before this builder: the differential test
//! (`yaml/reference.rs`) reads every vector and a generated corpus with both
//! and compares trees and error positions.

use super::{Key, Node, NodeValue, Position as At, TAGS_REFUSED, is_merge_key, is_null_spelling, is_tagged};
use crate::error::{Origin, Problem, ProblemCode};
use granit_parser::{Event, ScalarStyle, ScanError, Span};
use std::borrow::Cow;
use std::collections::BTreeSet;

/// The budgets, one constant per limit: the error message names it.
pub(super) mod limits {
    pub const DEPTH: usize = 48;
    pub const ALIASES: usize = 1_000;
    pub const ANCHORS: usize = 1_000;
    pub const NODES: usize = 200_000;
    pub const EVENTS: usize = 400_000;
    pub const SCALAR_BYTES: usize = super::super::MAX_YAML_BYTES;
    pub const RECORDED_ANCHOR_EVENTS: usize = 20_000;
    pub const RECORDED_ANCHOR_BYTES: usize = 1024 * 1024;
    pub const MERGE_KEYS: usize = 10_000;
    /// A document that uses at least this many aliases…
    pub const RATIO_MIN_ALIASES: usize = 100;
    /// …must define an anchor for every this many of them.
    pub const RATIO_ALIASES_PER_ANCHOR: usize = 10;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Limit {
    Depth,
    Aliases,
    Anchors,
    Nodes,
    Events,
    ScalarBytes,
    RecordedEvents,
    RecordedBytes,
    MergeKeys,
    Documents,
    AliasRatio,
}

impl Limit {
    fn message(self) -> String {
        use limits::*;
        let expands = "aliases (`*name`) expand";
        match self {
            Limit::RecordedEvents => {
                format!("{expands} too far: anchored values would hold more than {RECORDED_ANCHOR_EVENTS} YAML events")
            }
            Limit::RecordedBytes => {
                format!("{expands} too far: anchored values would hold more than {RECORDED_ANCHOR_BYTES} bytes")
            }
            Limit::ScalarBytes => format!("{expands} too far: the text would be larger than {SCALAR_BYTES} bytes"),
            Limit::Nodes => format!("the YAML has more than {NODES} values, aliases expanded"),
            Limit::Events => format!("the YAML has more than {EVENTS} YAML events, aliases expanded"),
            Limit::Aliases => format!("the YAML uses more than {ALIASES} aliases (`*name`)"),
            Limit::Anchors => format!("the YAML defines more than {ANCHORS} anchors (`&name`)"),
            Limit::Depth => format!("the YAML nests more than {DEPTH} levels deep"),
            Limit::Documents => "the text holds more than one YAML document (`---`)".to_owned(),
            Limit::MergeKeys => format!("the YAML uses more than {MERGE_KEYS} merge keys (`<<`)"),
            Limit::AliasRatio => format!(
                "the YAML uses {RATIO_MIN_ALIASES} aliases (`*name`) or more, over {RATIO_ALIASES_PER_ANCHOR} per anchor"
            ),
        }
    }
}

/// What one node costs once expanded: the counts an alias to it replays.
#[derive(Debug, Clone, Copy, Default)]
struct Weight {
    events: usize,
    nodes: usize,
    scalar_bytes: usize,
    /// Text the parser had to rewrite (escapes, folding): kept by anchors.
    owned_bytes: usize,
    /// Container levels, the node's own included.
    depth: usize,
    merge_keys: usize,
}

impl Weight {
    fn add(&mut self, other: &Weight) {
        self.events = self.events.saturating_add(other.events);
        self.nodes = self.nodes.saturating_add(other.nodes);
        self.scalar_bytes = self.scalar_bytes.saturating_add(other.scalar_bytes);
        self.owned_bytes = self.owned_bytes.saturating_add(other.owned_bytes);
        self.depth = self.depth.max(other.depth);
        self.merge_keys = self.merge_keys.saturating_add(other.merge_keys);
    }
}

/// An anchored node, kept for its aliases.
#[derive(Debug)]
struct Anchored {
    node: Node,
    /// A scalar whose value is refused (`.inf` read as a key).
    refused: Option<&'static str>,
    /// The scalar's text, for an alias used as a mapping key.
    key: Option<KeyText>,
    weight: Weight,
}

#[derive(Debug, Clone)]
enum KeyText {
    Text(String),
    /// A null can be no key: refused where the null is written.
    Null(At),
}

/// Running totals against [`limits`].
#[derive(Debug, Default)]
struct Totals {
    events: usize,
    nodes: usize,
    scalar_bytes: usize,
    aliases: usize,
    anchors: usize,
    documents: usize,
    merge_keys: usize,
    recorded_events: usize,
    recorded_bytes: usize,
}

struct Builder<'input, I> {
    events: I,
    origin: Origin,
    totals: Totals,
    anchors: Vec<Option<Anchored>>,
    /// Anchors whose node is still being read (their recording is open).
    open_anchors: Vec<usize>,
    /// Containers open around the current event.
    depth: usize,
    /// The last event's position (the end of the text once it is read).
    last: At,
    /// Inside a list or mapping written as a key: it is refused as a whole
    /// once read, so only the parser's and the budgets' errors within it
    /// count (the same errors, at the same places, as before this builder).
    in_container_key: usize,
    /// Inside a mapping a merge key (`<<`) brings: its entries are looked at
    /// once the mapping holding the `<<` ends, so a syntax error or a
    /// crossed budget before that comes first; the first other problem in
    /// them is held here until then.
    merging_mapping: usize,
    held: Option<Problem>,
    _input: std::marker::PhantomData<&'input ()>,
}

type Built = (Node, Weight, Option<KeyText>);

/// Builds the one document of `text` (non-empty; `keys.rs` has refused tags).
pub(super) fn build(text: &str, origin: Origin) -> Result<Node, Problem> {
    let mut builder = Builder {
        events: granit_parser::Parser::new_from_str(text),
        origin,
        totals: Totals::default(),
        anchors: Vec::new(),
        open_anchors: Vec::new(),
        depth: 0,
        last: At { line: 1, column: 1 },
        in_container_key: 0,
        merging_mapping: 0,
        held: None,
        _input: std::marker::PhantomData,
    };
    builder.document()
}

fn scan_problem(origin: Origin, err: &ScanError) -> Problem {
    let info = err.info();
    let message = info.lines().next().unwrap_or("invalid YAML");
    Problem::new(ProblemCode::Syntax, origin, message).at(err.marker().line() as u64, err.marker().col() as u64 + 1)
}

impl<'input, I> Builder<'input, I>
where
    I: Iterator<Item = Result<(Event<'input>, Span), ScanError>>,
{
    fn problem(&self, at: At, message: impl Into<String>) -> Problem {
        Problem::new(ProblemCode::Syntax, self.origin, message).at(at.line, at.column)
    }

    /// A problem with what the text means (not with its syntax or size):
    /// reported now, held (in a merged mapping) or dropped (in a key that is
    /// refused anyway); the caller goes on with a placeholder when held.
    fn meaning(&mut self, problem: Problem) -> Result<(), Problem> {
        if self.in_container_key > 0 {
            return Ok(());
        }
        if self.merging_mapping > 0 {
            self.held.get_or_insert(problem);
            return Ok(());
        }
        Err(problem)
    }

    /// A merge key's value that is not a mapping: reported at once, even
    /// inside a merged mapping (dropped only in a key refused anyway; in a
    /// merged mapping, which is read one event ahead, a parser error on the
    /// very next token comes first).
    fn merge_problem(&mut self, at: At) -> Result<(), Problem> {
        if self.in_container_key > 0 {
            return Ok(());
        }
        if self.merging_mapping > 0
            && let Some(Err(err)) = self.events.next()
        {
            return Err(scan_problem(self.origin, &err));
        }
        Err(self.problem(at, NOT_A_MAPPING))
    }

    fn breach(&self, at: At, limit: Limit) -> Problem {
        self.problem(at, limit.message())
    }

    /// The next event, counted; stream and document markers are counted
    /// here and skipped (a second document is refused).
    fn next(&mut self) -> Result<Option<(Event<'input>, At)>, Problem> {
        loop {
            let Some(item) = self.events.next() else {
                return Ok(None);
            };
            let (event, span) = item.map_err(|err| scan_problem(self.origin, &err))?;
            let at = At::from(&span);
            self.last = at;
            if matches!(event, Event::Alias(_)) {
                return Ok(Some((event, at)));
            }
            self.totals.events += 1;
            if self.totals.events > limits::EVENTS {
                return Err(self.breach(at, Limit::Events));
            }
            match event {
                Event::DocumentStart(..) => {
                    self.totals.documents += 1;
                    if self.totals.documents > 1 {
                        return Err(self.breach(at, Limit::Documents));
                    }
                }
                Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
                Event::Scalar(..) | Event::SequenceStart(..) | Event::MappingStart(..) => {
                    self.count_node(at)?;
                    return Ok(Some((event, at)));
                }
                Event::SequenceEnd | Event::MappingEnd => return Ok(Some((event, at))),
                _ => {}
            }
        }
    }

    fn count_node(&mut self, at: At) -> Result<(), Problem> {
        self.totals.nodes += 1;
        if self.totals.nodes > limits::NODES {
            return Err(self.breach(at, Limit::Nodes));
        }
        Ok(())
    }

    fn define_anchor(&mut self, anchor: usize, at: At) -> Result<(), Problem> {
        if anchor != 0 {
            self.totals.anchors += 1;
            if self.totals.anchors > limits::ANCHORS {
                return Err(self.breach(at, Limit::Anchors));
            }
        }
        Ok(())
    }

    /// Charges `events` events (and `bytes` rewritten bytes) copied into
    /// every anchor still being read.
    fn record(&mut self, events: usize, bytes: usize, at: At) -> Result<(), Problem> {
        let copies = self.open_anchors.len();
        self.totals.recorded_events = self
            .totals
            .recorded_events
            .saturating_add(copies.saturating_mul(events));
        if self.totals.recorded_events > limits::RECORDED_ANCHOR_EVENTS {
            return Err(self.breach(at, Limit::RecordedEvents));
        }
        self.totals.recorded_bytes = self.totals.recorded_bytes.saturating_add(copies.saturating_mul(bytes));
        if self.totals.recorded_bytes > limits::RECORDED_ANCHOR_BYTES {
            return Err(self.breach(at, Limit::RecordedBytes));
        }
        Ok(())
    }

    fn document(&mut self) -> Result<Node, Problem> {
        let mut root: Option<Node> = None;
        while let Some((event, at)) = self.next()? {
            if root.is_some() {
                // The parser ends a document before another node starts.
                return Err(self.problem(at, "unexpected content after the document"));
            }
            let (node, _, _) = self.node(event, at, false)?;
            root = Some(node);
        }
        if let Some(problem) = self.held.take() {
            return Err(problem);
        }
        self.check_alias_ratio()?;
        Ok(root.unwrap_or(Node {
            value: NodeValue::Null,
            line: self.last.line,
            column: self.last.column,
        }))
    }

    /// Many aliases over few anchors is how expansion attacks are shaped.
    fn check_alias_ratio(&self) -> Result<(), Problem> {
        let aliases = self.totals.aliases;
        if aliases >= limits::RATIO_MIN_ALIASES
            && (self.totals.anchors == 0
                || aliases > limits::RATIO_ALIASES_PER_ANCHOR.saturating_mul(self.totals.anchors))
        {
            return Err(self.breach(self.last, Limit::AliasRatio));
        }
        Ok(())
    }

    /// Reads the node that starts with `event`; `in_key`: it is a mapping key.
    fn node(&mut self, event: Event<'input>, at: At, in_key: bool) -> Result<Built, Problem> {
        if is_tagged(&event) {
            // `keys.rs` reports these first; never read one as untagged.
            return Err(self.problem(at, TAGS_REFUSED));
        }
        match event {
            Event::Scalar(text, style, anchor, _) => self.scalar(text, style, anchor, at, in_key),
            Event::Alias(id) => self.alias(id, at, in_key),
            Event::SequenceStart(_, anchor, _) => self.container(anchor, at, Shape::Sequence),
            Event::MappingStart(_, anchor, _) => self.container(anchor, at, Shape::Mapping),
            _ => Err(self.problem(at, "unexpected YAML event")),
        }
    }

    fn scalar(
        &mut self,
        text: Cow<'input, str>,
        style: ScalarStyle,
        anchor: usize,
        at: At,
        in_key: bool,
    ) -> Result<Built, Problem> {
        let bytes = text.len();
        self.totals.scalar_bytes = self.totals.scalar_bytes.saturating_add(bytes);
        if self.totals.scalar_bytes > limits::SCALAR_BYTES {
            return Err(self.breach(at, Limit::ScalarBytes));
        }
        self.define_anchor(anchor, at)?;
        let plain = style == ScalarStyle::Plain;
        // `yaml::is_merge_key`, on the event's parts (a `<<` written plain, as a key).
        let merge_key = in_key && plain && text == "<<";
        if merge_key {
            self.totals.merge_keys += 1;
            if self.totals.merge_keys > limits::MERGE_KEYS {
                return Err(self.breach(at, Limit::MergeKeys));
            }
        }
        let owned_bytes = if matches!(text, Cow::Owned(_)) { bytes } else { 0 };
        if anchor != 0 {
            // Its own anchor keeps one more copy.
            self.totals.recorded_events = self.totals.recorded_events.saturating_add(1);
            self.totals.recorded_bytes = self.totals.recorded_bytes.saturating_add(owned_bytes);
        }
        self.record(1, owned_bytes, at)?;
        let weight = Weight {
            events: 1,
            nodes: 1,
            scalar_bytes: bytes,
            owned_bytes,
            depth: 0,
            merge_keys: usize::from(merge_key),
        };
        // A key is its text; an anchored scalar keeps both readings, for
        // aliases used as keys and as values.
        let key = (in_key || anchor != 0).then(|| {
            if plain && is_null_spelling(&text) {
                KeyText::Null(at)
            } else {
                KeyText::Text(text.to_string())
            }
        });
        let (value, refused) = match (plain, in_key && anchor == 0) {
            (_, true) => (NodeValue::Null, None),
            (false, false) => (NodeValue::Str(text.into_owned()), None),
            (true, false) => match typed_plain(&text) {
                Ok(value) => (value, None),
                Err(message) => {
                    if !in_key {
                        self.meaning(self.problem(at, message))?;
                    }
                    (NodeValue::Str(text.into_owned()), Some(message))
                }
            },
        };
        let node = Node {
            value,
            line: at.line,
            column: at.column,
        };
        if anchor != 0 {
            self.keep(anchor, &node, refused, key.clone(), weight);
        }
        Ok((node, weight, key))
    }

    fn keep(
        &mut self,
        anchor: usize,
        node: &Node,
        refused: Option<&'static str>,
        key: Option<KeyText>,
        weight: Weight,
    ) {
        if self.anchors.len() <= anchor {
            self.anchors.resize_with(anchor + 1, || None);
        }
        if let Some(slot) = self.anchors.get_mut(anchor) {
            *slot = Some(Anchored {
                node: node.clone(),
                refused,
                key,
                weight,
            });
        }
    }

    fn alias(&mut self, id: usize, at: At, in_key: bool) -> Result<Built, Problem> {
        self.totals.events += 1;
        if self.totals.events > limits::EVENTS {
            return Err(self.breach(at, Limit::Events));
        }
        self.totals.aliases += 1;
        if self.totals.aliases > limits::ALIASES {
            return Err(self.breach(at, Limit::Aliases));
        }
        if self.open_anchors.contains(&id) {
            self.meaning(self.problem(at, "an alias (`*name`) refers to the value that contains it"))?;
            let placeholder = Node {
                value: NodeValue::Null,
                line: at.line,
                column: at.column,
            };
            return Ok((placeholder, Weight::default(), None));
        }
        let Some(weight) = self.anchored(id).map(|anchored| anchored.weight) else {
            return Err(self.problem(at, "an alias (`*name`) refers to no anchor defined before it"));
        };
        let totals = &mut self.totals;
        totals.events = totals.events.saturating_add(weight.events);
        totals.nodes = totals.nodes.saturating_add(weight.nodes);
        totals.scalar_bytes = totals.scalar_bytes.saturating_add(weight.scalar_bytes);
        totals.merge_keys = totals.merge_keys.saturating_add(weight.merge_keys);
        let crossed = if totals.events > limits::EVENTS {
            Some(Limit::Events)
        } else if totals.nodes > limits::NODES {
            Some(Limit::Nodes)
        } else if totals.scalar_bytes > limits::SCALAR_BYTES {
            Some(Limit::ScalarBytes)
        } else if self.depth.saturating_add(weight.depth) > limits::DEPTH {
            Some(Limit::Depth)
        } else if totals.merge_keys > limits::MERGE_KEYS {
            Some(Limit::MergeKeys)
        } else {
            None
        };
        if let Some(limit) = crossed {
            return Err(self.breach(at, limit));
        }
        self.record(weight.events, weight.owned_bytes, at)?;
        let Some(anchored) = self.anchored(id) else {
            return Err(self.problem(at, "an alias (`*name`) refers to no anchor defined before it"));
        };
        let key = anchored.key.clone();
        let refused = anchored.refused.filter(|_| !in_key);
        let mut node = anchored.node.clone();
        if let Some(message) = refused {
            self.meaning(self.problem(at, message))?;
        }
        // A value reached through an alias is reported where the alias is.
        relocate(&mut node, at);
        Ok((node, weight, key))
    }

    fn anchored(&self, id: usize) -> Option<&Anchored> {
        self.anchors.get(id).and_then(Option::as_ref)
    }

    /// A merge key's value: a list is checked item by item as it is read.
    /// A mapping it brings is read whole first (`merging_mapping`).
    fn merge_value(&mut self, event: Event<'input>, at: At) -> Result<Built, Problem> {
        match event {
            Event::SequenceStart(_, anchor, None) => self.container(anchor, at, Shape::MergeList),
            Event::MappingStart(_, anchor, None) => {
                self.merging_mapping += 1;
                let built = self.container(anchor, at, Shape::Mapping);
                self.merging_mapping -= 1;
                built
            }
            Event::Alias(id) => {
                let built = self.alias(id, at, false)?;
                if let Some(found) = self
                    .anchored(id)
                    .and_then(|anchored| not_a_merge_source(&anchored.node))
                {
                    self.merge_problem(found)?;
                }
                Ok(built)
            }
            event => self.node(event, at, false),
        }
    }

    fn container(&mut self, anchor: usize, at: At, shape: Shape) -> Result<Built, Problem> {
        self.depth += 1;
        if self.depth > limits::DEPTH {
            return Err(self.breach(at, Limit::Depth));
        }
        self.define_anchor(anchor, at)?;
        if anchor != 0 {
            self.open_anchors.push(anchor);
        }
        self.record(1, 0, at)?;
        let mut weight = Weight {
            events: 2,
            nodes: 1,
            ..Weight::default()
        };
        let value = match shape {
            Shape::Mapping => self.mapping_entries(&mut weight)?,
            Shape::Sequence => self.sequence_items(&mut weight, false)?,
            Shape::MergeList => self.sequence_items(&mut weight, true)?,
        };
        weight.depth += 1;
        if anchor != 0 {
            self.open_anchors.pop();
        }
        self.depth -= 1;
        let node = Node {
            value,
            line: at.line,
            column: at.column,
        };
        if anchor != 0 {
            self.keep(anchor, &node, None, None, weight);
        }
        Ok((node, weight, None))
    }

    /// The end event closes the container: counted into open anchors.
    fn end(&mut self, at: At) -> Result<(), Problem> {
        self.record(1, 0, at)
    }

    /// `merging`: the list is a merge key's value (or one nested in it),
    /// whose items must be mappings, null or such lists.
    fn sequence_items(&mut self, weight: &mut Weight, merging: bool) -> Result<NodeValue, Problem> {
        let mut items = Vec::new();
        loop {
            let (event, at) = self.expect_event()?;
            if matches!(event, Event::SequenceEnd) {
                self.end(at)?;
                return Ok(NodeValue::Seq(items));
            }
            let (item, item_weight, _) = if merging {
                self.merge_value(event, at)?
            } else {
                self.node(event, at, false)?
            };
            if merging && !matches!(item.value, NodeValue::Map(_) | NodeValue::Null | NodeValue::Seq(_)) {
                self.merge_problem(at_of(&item))?;
            }
            weight.add(&item_weight);
            items.push(item);
        }
    }

    fn expect_event(&mut self) -> Result<(Event<'input>, At), Problem> {
        match self.next()? {
            Some(found) => Ok(found),
            None => Err(self.problem(self.last, "the YAML ends inside a list or mapping")),
        }
    }

    fn mapping_entries(&mut self, weight: &mut Weight) -> Result<NodeValue, Problem> {
        let mut entries: Vec<(Key, Node)> = Vec::new();
        // The keys written so far: a look-up per key keeps a mapping of
        // 10 000 tools from being quadratic.
        let mut written: BTreeSet<String> = BTreeSet::new();
        let mut merged: Vec<(Key, Node)> = Vec::new();
        let mut held_here: Option<Problem> = None;
        loop {
            let (event, key_at) = self.expect_event()?;
            if matches!(event, Event::MappingEnd) {
                self.end(key_at)?;
                if let Some(problem) = held_here {
                    self.meaning(problem)?;
                }
                break;
            }
            let is_merge = is_merge_key(&event);
            let container_key = matches!(event, Event::SequenceStart(..) | Event::MappingStart(..));
            self.in_container_key += usize::from(container_key);
            let built_key = self.node(event, key_at, true);
            self.in_container_key -= usize::from(container_key);
            let (key_node, key_weight, key_text) = built_key?;
            weight.add(&key_weight);
            let key = match (is_merge, self.key(&key_node, key_text, &written)) {
                (true, _) => None,
                (false, Ok(key)) => Some(key),
                (false, Err(problem)) => {
                    self.meaning(problem)?;
                    None
                }
            };
            let (value_event, value_at) = self.expect_event()?;
            let (value, value_weight, _) = if is_merge {
                self.merge_value(value_event, value_at)?
            } else {
                self.node(value_event, value_at, false)?
            };
            weight.add(&value_weight);
            if is_merge && self.merging_mapping == 0 {
                let held = self.held.take();
                held_here = held_here.or(held);
            }
            match key {
                Some(key) => {
                    written.insert(key.name.clone());
                    entries.push((key, value));
                }
                None if !is_merge => {}
                None => self.merge_sources(value, &mut merged)?,
            }
        }
        // YAML's merge rule: a key written in the mapping wins over a merged
        // one, and of two merged mappings the first listed wins.
        for (key, value) in merged {
            if written.insert(key.name.clone()) {
                entries.push((key, value));
            }
        }
        Ok(NodeValue::Map(entries))
    }

    /// A mapping key: text, not null, not a list or mapping, not written
    /// twice.
    fn key(&self, node: &Node, text: Option<KeyText>, written: &BTreeSet<String>) -> Result<Key, Problem> {
        let at = at_of(node);
        let name = match text {
            Some(KeyText::Text(name)) => name,
            Some(KeyText::Null(null_at)) => {
                return Err(self.problem(null_at, "a mapping key is null: write the key as text"));
            }
            None => return Err(self.problem(at, "a mapping key is a list or a mapping: keys are text")),
        };
        if written.contains(&name) {
            return Err(self.problem(
                at,
                format!("duplicate key `{}`", crate::json::truncate_for_message(&name)),
            ));
        }
        Ok(Key {
            name,
            line: node.line,
            column: node.column,
        })
    }

    /// The entries a `<<` value brings: a mapping, or a list of mappings
    /// (null brings none). Each entry is reported where its mapping is
    /// referenced: the `{` of an inline one, the alias of an anchored one.
    fn merge_sources(&mut self, value: Node, merged: &mut Vec<(Key, Node)>) -> Result<(), Problem> {
        let at = at_of(&value);
        match value.value {
            NodeValue::Null => {}
            NodeValue::Map(entries) => merged.extend(relocated(entries, at)),
            NodeValue::Seq(items) => {
                for item in items {
                    let item_at = at_of(&item);
                    self.merge_listed(item, item_at, merged)?;
                }
            }
            _ => self.merge_problem(at)?,
        }
        Ok(())
    }

    /// One item of a `<<` list: a mapping, null (none), or a list of those
    /// (flattened), all reported at the item.
    fn merge_listed(&mut self, item: Node, at: At, merged: &mut Vec<(Key, Node)>) -> Result<(), Problem> {
        let found_at = at_of(&item);
        match item.value {
            NodeValue::Null => {}
            NodeValue::Map(entries) => merged.extend(relocated(entries, at)),
            NodeValue::Seq(items) => {
                for inner in items {
                    self.merge_listed(inner, at, merged)?;
                }
            }
            _ => self.merge_problem(found_at)?,
        }
        Ok(())
    }
}

fn relocated(mut entries: Vec<(Key, Node)>, at: At) -> Vec<(Key, Node)> {
    relocate_entries(&mut entries, at);
    entries
}

fn relocate_entries(entries: &mut [(Key, Node)], at: At) {
    for (key, value) in entries {
        key.line = at.line;
        key.column = at.column;
        relocate(value, at);
    }
}

const NOT_A_MAPPING: &str = "a merge key (`<<`) takes a mapping or a list of mappings";

#[derive(Debug, Clone, Copy)]
enum Shape {
    Mapping,
    Sequence,
    /// A list under a merge key (`<<`).
    MergeList,
}

/// Where a merge source (a mapping, null, or a list of those) holds
/// something else.
fn not_a_merge_source(node: &Node) -> Option<At> {
    match &node.value {
        NodeValue::Null | NodeValue::Map(_) => None,
        NodeValue::Seq(items) => items.iter().find_map(not_a_merge_source),
        _ => Some(at_of(node)),
    }
}

fn at_of(node: &Node) -> At {
    At {
        line: node.line,
        column: node.column,
    }
}

fn relocate(node: &mut Node, at: At) {
    node.line = at.line;
    node.column = at.column;
    match &mut node.value {
        NodeValue::Seq(items) => items.iter_mut().for_each(|item| relocate(item, at)),
        NodeValue::Map(entries) => relocate_entries(entries, at),
        _ => {}
    }
}

/// A plain scalar's value: null, boolean, integer, float or string, by the
/// YAML 1.2 core schema with strict booleans (`yes`, `on` stay strings), a
/// zero-led decimal read as a float (`01` is 1.0, never octal), and
/// non-finite floats refused.
pub(super) fn typed_plain(text: &str) -> Result<NodeValue, &'static str> {
    if is_null_spelling(text) {
        return Ok(NodeValue::Null);
    }
    let t = text.trim_matches([' ', '\t', '\r', '\n']);
    match t {
        "true" | "True" | "TRUE" => return Ok(NodeValue::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(NodeValue::Bool(false)),
        _ => {}
    }
    let signed = t.starts_with(['+', '-']);
    let unsigned = t.strip_prefix(['+', '-']).unwrap_or(t);
    let uppercase_radix = matches!(unsigned.as_bytes(), [b'0', b'X' | b'O' | b'B', ..]);
    let signed_nan = signed && matches!(unsigned, ".nan" | ".NaN" | ".NAN");
    if uppercase_radix || signed_nan {
        return Ok(NodeValue::Str(text.to_owned()));
    }
    if let Some(rest) = t.strip_prefix('-') {
        if !leading_zero_decimal(rest)
            && let Some(n) = integer(rest)
                .and_then(|m| 0i128.checked_sub(m))
                .and_then(|n| i64::try_from(n).ok())
        {
            return Ok(NodeValue::Number(n.into()));
        }
    } else if let Some(n) = integer(unsigned).and_then(|m| u64::try_from(m).ok()) {
        return Ok(NodeValue::Number(n.into()));
    }
    if matches!(unsigned, ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF") {
        return Err("a non-finite number (`.inf`, `.nan`) is not accepted");
    }
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(NodeValue::Number(
            serde_json::Number::from_f64(v).ok_or("number out of range")?,
        )),
        // `1e999`: a numeral too large for a float.
        Ok(v) if v.is_infinite() && unsigned.starts_with(|c: char| c.is_ascii_digit()) => {
            Err("a number too large for a float is not accepted")
        }
        _ => Ok(NodeValue::Str(text.to_owned())),
    }
}

/// `0127`: a decimal with a redundant leading zero.
pub(super) fn leading_zero_decimal(digits: &str) -> bool {
    digits.len() > 1 && digits.starts_with('0') && digits.bytes().all(|b| b.is_ascii_digit())
}

/// An unsigned integer: decimal without a leading zero, or `0x`, `0o`,
/// `0b` with digits; `_` allowed between digits. `None` when not one or
/// too large.
fn integer(text: &str) -> Option<i128> {
    let (radix, digits) = if let Some(d) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        (16, d)
    } else if let Some(d) = text.strip_prefix("0o").or_else(|| text.strip_prefix("0O")) {
        (8, d)
    } else if let Some(d) = text.strip_prefix("0b").or_else(|| text.strip_prefix("0B")) {
        (2, d)
    } else {
        if text.starts_with('0') && text != "0" {
            return None;
        }
        (10, text)
    };
    let bytes = digits.as_bytes();
    let mut value: u128 = 0;
    let mut saw_digit = false;
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'_' {
            let prev_ok = i > 0 && bytes.get(i - 1) != Some(&b'_');
            let next_ok = bytes.get(i + 1).is_some_and(|&n| n != b'_');
            if !prev_ok || !next_ok {
                return None;
            }
            continue;
        }
        let digit = char::from(b).to_digit(16)?;
        if digit >= radix {
            return None;
        }
        value = value.checked_mul(u128::from(radix))?.checked_add(u128::from(digit))?;
        saw_digit = true;
    }
    if !saw_digit {
        return None;
    }
    i128::try_from(value).ok()
}
