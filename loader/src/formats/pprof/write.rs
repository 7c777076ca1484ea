//! Writing a pprof profile (gzipped `profile.proto`) from stacks of
//! function names: what `flamehouse profile export` hands to `go tool
//! pprof`. One location per distinct function with one line naming it (a
//! stored stack keeps function names, not addresses), every sample leaf
//! first as profile.proto wants.

use super::proto;
use prost::Message;
use std::collections::HashMap;
use std::io::Write;

/// What to write besides the stacks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// The one sample type: `(type, unit)`, e.g. `("cpu", "nanoseconds")`.
    pub sample_type: (String, String),
    /// The period type, `(type, unit)`, when known.
    pub period_type: Option<(String, String)>,
    /// The period (0 when unknown).
    pub period: i64,
    /// Collection time, ns since the epoch.
    pub time_nanos: i64,
    /// Duration of the collection, ns.
    pub duration_nanos: i64,
}

/// The gzipped protobuf of a profile of `stacks`: each `(frames root
/// first, value)`; a zero value is left out, as pprof's merge drops it.
#[must_use]
pub fn encode(stacks: &[(Vec<String>, i64)], opts: &WriteOptions) -> Vec<u8> {
    let mut strings: Vec<String> = vec![String::new()];
    let mut string_ids: HashMap<String, i64> = HashMap::new();
    let mut s = |x: &str| -> i64 {
        if x.is_empty() {
            return 0;
        }
        if let Some(&i) = string_ids.get(x) {
            return i;
        }
        strings.push(x.to_string());
        string_ids.insert(x.to_string(), strings.len() as i64 - 1);
        strings.len() as i64 - 1
    };
    let mut p = proto::Profile {
        sample_type: vec![proto::ValueType {
            r#type: s(&opts.sample_type.0),
            unit: s(&opts.sample_type.1),
        }],
        time_nanos: opts.time_nanos,
        duration_nanos: opts.duration_nanos,
        period: opts.period,
        ..Default::default()
    };
    if let Some((t, u)) = &opts.period_type {
        p.period_type = Some(proto::ValueType {
            r#type: s(t),
            unit: s(u),
        });
    }
    let mut location_of: HashMap<&str, u64> = HashMap::new();
    for (frames, value) in stacks {
        if *value == 0 {
            continue;
        }
        let mut ids = Vec::with_capacity(frames.len());
        for f in frames.iter().rev() {
            let id = match location_of.get(f.as_str()) {
                Some(&id) => id,
                None => {
                    let id = location_of.len() as u64 + 1;
                    p.function.push(proto::Function {
                        id,
                        name: s(f),
                        system_name: s(f),
                        ..Default::default()
                    });
                    p.location.push(proto::Location {
                        id,
                        line: vec![proto::Line {
                            function_id: id,
                            ..Default::default()
                        }],
                        ..Default::default()
                    });
                    location_of.insert(f, id);
                    id
                }
            };
            ids.push(id);
        }
        p.sample.push(proto::Sample {
            location_id: ids,
            value: vec![*value],
            ..Default::default()
        });
    }
    p.string_table = strings;
    let raw = p.encode_to_vec();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).expect("writing to memory");
    gz.finish().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// What is written decodes to the same stacks and values.
    #[test]
    fn encoded_profiles_decode_to_their_stacks() {
        let stacks = vec![
            (vec!["main".to_string(), "a".into(), "b".into()], 5),
            (vec!["main".to_string(), "a".into()], 3),
            (vec!["main".to_string(), "c".into()], 0),
            (vec![], 2),
        ];
        let opts = WriteOptions {
            sample_type: ("cpu".into(), "nanoseconds".into()),
            time_nanos: 7,
            ..Default::default()
        };
        let bytes = encode(&stacks, &opts);
        let p = super::super::decode(Path::new("x"), &bytes, &Default::default()).unwrap();
        assert_eq!(p.time_nanos, 7);
        assert_eq!(p.sample_types[0].kind, "cpu");
        let got: Vec<(Vec<String>, i64)> = p
            .samples
            .iter()
            .map(|s| {
                let mut names: Vec<String> =
                    p.frames(s).iter().map(|f| f.name().into_owned()).collect();
                names.reverse();
                (names, s.values[0])
            })
            .collect();
        let want: Vec<_> = stacks.into_iter().filter(|s| s.1 != 0).collect();
        assert_eq!(got, want);
    }
}
