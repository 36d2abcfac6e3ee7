//! Compiles the argument schemas of one load.
//!
//! Why not one `jsonschema` build per tool: before compiling a schema,
//! jsonschema checks it against its meta-schema, and on wasm targets
//! (jsonschema 0.61, `meta::validator_for_draft`) it builds that meta-schema
//! validator again for every schema, where natively it keeps one in a static.
//! In the component that rebuild was most of a load.
//!
//! So the schemas that mean the same inside another document as on their own
//! are compiled together, as one document `{"$defs": {"0": …, "1": …}}` with
//! `build_map`: one meta-schema check for all of them, and each tool takes the
//! validator of its own `#/$defs/N`. A schema is *self-contained* when nothing
//! in it resolves against, or changes, the document it sits in: no `$ref`,
//! `$dynamicRef`, `$recursiveRef`, `$id`, anchors, `$schema` or
//! `$vocabulary` anywhere (the document has no `$schema` either, so both get
//! the same default draft). Every other schema is compiled on its own, as is
//! every schema when the shared document does not compile, so a catalog with
//! a bad schema fails on the same tool with the same message as before.
//! Validation reports only the instance path and the keyword of an error
//! (`evaluate.rs`), and both are the same whichever way the schema was built.

use crate::json;
use jsonschema::Validator;
use serde_json::{Map, Value};

/// Keys that make a schema depend on the document around it.
const DOCUMENT_KEYS: [&str; 9] = [
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$recursiveAnchor",
    "$schema",
    "$vocabulary",
];

/// One validator (or the compile error's message) per schema, in order.
///
/// The schemas are borrowed mutably only to be moved into the shared
/// document and back (see [`compile_shared`]); they come back as they were.
pub fn compile_all(schemas: &mut [&mut Value]) -> Vec<Result<Validator, String>> {
    // One regex cache for the whole load: jsonschema's own cache lasts one
    // build, and `build_map` builds each `$defs/N` on its own, so a pattern
    // repeated across tools (the seed catalog has 145 patterns, 8 distinct)
    // was compiled once per tool: a fifth of a load in the component.
    let patterns = jsonschema::PatternCache::new();
    compile_shared(schemas, &patterns)
        .into_iter()
        .zip(schemas.iter())
        .map(|(done, schema)| match done {
            Some(validator) => Ok(validator),
            None => compile_with(schema, &patterns),
        })
        .collect()
}

/// The validators the shared document gives: one per self-contained
/// schema, or none at all when that document does not compile.
///
/// jsonschema's `build_map` compiles a validator at every object of the
/// document it walks, so schemas written inline under `$defs` were compiled
/// once for each level they sit at (a property's schema on its own, inside
/// its tool, and the `properties` map as if it were a schema), and the
/// extras dropped again: a third of a load at 1 000 tools (#17). Now the
/// schemas' document is a registry resource, checked against its
/// meta-schema first (as `build_map` checked it), and the walked document
/// holds one `{"$ref": "urn:toolgate:schemas#/$defs/N"}` per schema, so each
/// is compiled once, by the draft of the resource it sits in.
///
/// The schemas are moved into that document and moved back once it is
/// compiled (validators keep nothing of the document): copying every schema
/// and dropping the copies was a tenth of compiling a large catalog (#17).
fn compile_shared(schemas: &mut [&mut Value], patterns: &jsonschema::PatternCache) -> Vec<Option<Validator>> {
    let members: Vec<usize> = schemas
        .iter()
        .enumerate()
        .filter(|(_, schema)| self_contained(schema))
        .map(|(i, _)| i)
        .collect();
    // One schema alone gains nothing from the shared document.
    if members.len() <= 1 {
        return vec![None; schemas.len()];
    }
    // Inserted one by one: collecting would add a sort to the component for
    // each iterator type.
    let mut defs = Map::new();
    for &i in &members {
        if let Some(schema) = schemas.get_mut(i) {
            defs.insert(i.to_string(), std::mem::take(&mut **schema));
        }
    }
    let mut document = Value::Object(Map::from_iter([("$defs".to_owned(), Value::Object(defs))]));
    let compiled = compile_document(&document, &members, schemas.len(), patterns);
    if let Some(Value::Object(defs)) = document.get_mut("$defs") {
        for &i in &members {
            if let (Some(slot), Some(schema)) = (schemas.get_mut(i), defs.get_mut(&i.to_string())) {
                **slot = std::mem::take(schema);
            }
        }
    }
    compiled
}

/// `document` is `{"$defs": {"N": schema N, …}}` for each N in `members`.
fn compile_document(
    document: &Value,
    members: &[usize],
    count: usize,
    patterns: &jsonschema::PatternCache,
) -> Vec<Option<Validator>> {
    let mut compiled: Vec<Option<Validator>> = vec![None; count];
    // A registry resource is not checked against the meta-schema when a
    // reference into it is compiled.
    if !jsonschema::meta::is_valid(document) {
        return compiled;
    }
    let Ok(registry) = jsonschema::Registry::new()
        .draft(jsonschema::Draft::Draft202012)
        .add(SCHEMAS_URI, document)
        .and_then(|builder| builder.prepare())
    else {
        return compiled;
    };
    let mut refs = Map::new();
    for i in members {
        let target = Value::String(format!("{SCHEMAS_URI}#/$defs/{i}"));
        refs.insert(
            i.to_string(),
            Value::Object(Map::from_iter([("$ref".to_owned(), target)])),
        );
    }
    // The walked document is checked against its own meta-schema again, and
    // on wasm targets jsonschema builds that meta-schema's validator anew
    // for every check: draft 4's is a fraction of 2020-12's. Nothing of it
    // reaches a validator: a `$ref` to an absolute URI compiles its target
    // by the draft of the resource the target is in (2020-12, as before).
    let walked = Value::Object(Map::from_iter([
        ("$schema".to_owned(), Value::String(DRAFT4_URI.to_owned())),
        ("$defs".to_owned(), Value::Object(refs)),
    ]));
    if let Ok(map) = options(patterns).with_registry(&registry).build_map(&walked) {
        for &i in members {
            if let (Some(slot), Some(validator)) = (compiled.get_mut(i), map.get(&format!("#/$defs/{i}"))) {
                *slot = Some(validator.clone());
            }
        }
    }
    compiled
}

/// Where the shared document sits in the registry: a name no schema can
/// reach, since a self-contained schema has no `$ref`.
const SCHEMAS_URI: &str = "urn:toolgate:schemas";
const DRAFT4_URI: &str = "http://json-schema.org/draft-04/schema#";

/// One schema on its own.
pub fn compile(schema: &Value) -> Result<Validator, String> {
    compile_with(schema, &jsonschema::PatternCache::new())
}

fn compile_with(schema: &Value, patterns: &jsonschema::PatternCache) -> Result<Validator, String> {
    options(patterns)
        .build(schema)
        .map_err(|e| json::truncate_for_message(&e.to_string()).into_owned())
}

fn options<'a>(patterns: &jsonschema::PatternCache) -> jsonschema::ValidationOptions<'a> {
    jsonschema::options()
        .should_validate_formats(true)
        .with_pattern_cache(patterns.clone())
}

fn self_contained(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => map
            .iter()
            .all(|(key, value)| !DOCUMENT_KEYS.contains(&key.as_str()) && self_contained(value)),
        Value::Array(items) => items.iter().all(self_contained),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn errors(validator: &Validator, instance: &Value) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = validator
            .iter_errors(instance)
            .map(|e| (e.instance_path().as_str().to_owned(), format!("{:?}", e.kind())))
            .collect();
        out.sort();
        out
    }

    /// Compiled together or alone, a schema reports the same errors.
    #[test]
    fn shared_document_validates_like_each_schema_alone() {
        let schemas = [
            json!({"type": "object", "properties": {"id": {"type": "string", "minLength": 2}}, "required": ["id"]}),
            json!({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "additionalProperties": false}),
            json!({"type": "object", "properties": {"when": {"type": "string", "format": "date"}},
                   "unevaluatedProperties": false}),
            json!({"type": "object", "$defs": {"x": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/x"}}}),
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                   "properties": {"items": {"type": "array", "items": [{"type": "string"}]}}}),
        ];
        let instances = [
            json!({}),
            json!({"id": "a"}),
            json!({"id": "ab", "n": 9, "extra": true}),
            json!({"when": "2026-13-40", "x": 5}),
            json!({"items": [1, "a"], "n": "3"}),
            json!([1]),
        ];
        let mut moved = schemas.clone();
        let mut refs: Vec<&mut Value> = moved.iter_mut().collect();
        let shared: Vec<bool> = compile_shared(&mut refs, &jsonschema::PatternCache::new())
            .iter()
            .map(Option::is_some)
            .collect();
        assert_eq!(
            shared,
            [true, true, true, false, false],
            "the first three share one document"
        );
        let together = compile_all(&mut refs);
        assert_eq!(together.len(), schemas.len());
        assert_eq!(
            moved, schemas,
            "the schemas come back from the shared document as they were"
        );
        for (schema, shared) in schemas.iter().zip(&together) {
            let alone = compile(schema).expect("compiles alone");
            let shared = shared.as_ref().expect("compiles together");
            for instance in &instances {
                assert_eq!(
                    errors(shared, instance),
                    errors(&alone, instance),
                    "{schema} on {instance}"
                );
            }
        }
    }

    /// The middle schema of three is bad: the shared document is refused
    /// whole, the other two still compile, and the bad one fails with the
    /// message it gets alone.
    fn refused_whole_and_worded_alone(schemas: [Value; 3]) {
        let mut moved = schemas.clone();
        let mut refs: Vec<&mut Value> = moved.iter_mut().collect();
        assert!(compile(&schemas[1]).is_err(), "alone it fails");
        assert!(
            compile_shared(&mut refs, &jsonschema::PatternCache::new())
                .iter()
                .all(Option::is_none),
            "the shared document is refused whole"
        );
        assert_eq!(moved, schemas, "the schemas come back when the document is refused");
        let mut refs: Vec<&mut Value> = moved.iter_mut().collect();
        let out = compile_all(&mut refs);
        assert!(out[0].is_ok() && out[2].is_ok());
        assert_eq!(out[1].as_ref().err(), compile(&schemas[1]).err().as_ref());
    }

    #[test]
    fn a_bad_schema_fails_alone_and_the_others_still_compile() {
        refused_whole_and_worded_alone([
            json!({"type": "object"}),
            json!({"type": "no-such-type"}),
            json!({"type": "object", "properties": {"a": {"type": "string"}}}),
        ]);
    }

    /// A schema the compiler would take but its meta-schema does not (a
    /// `$comment` must be a string) is refused, shared or alone: the shared
    /// schemas sit in a registry, where nothing checks them on the way in.
    #[test]
    fn the_meta_schema_is_checked_for_shared_schemas_too() {
        refused_whole_and_worded_alone([
            json!({"type": "object"}),
            json!({"type": "object", "$comment": 5}),
            json!({"type": "string"}),
        ]);
    }

    #[test]
    fn document_keys_anywhere_keep_a_schema_alone() {
        assert!(self_contained(
            &json!({"type": "object", "properties": {"id": {"type": "string"}}})
        ));
        assert!(!self_contained(&json!({"properties": {"a": {"$ref": "#/$defs/a"}}})));
        assert!(!self_contained(&json!({"anyOf": [{"$id": "urn:x"}]})));
        assert!(!self_contained(
            &json!({"$schema": "http://json-schema.org/draft-07/schema#"})
        ));
    }
}
