//! Mutations of an input file for the parser fuzzing (the Rust half of tests/fuzzing.py): a
//! proptest strategy of one to four edits (delete, duplicate, swap or truncate lines; replace
//! a number or a `key=value` / `key = value` value by an interesting one; insert junk bytes;
//! flip a bit), applied to a seed's bytes. Positions are taken modulo the input's size, so
//! every edit applies to any seed.

use proptest::prelude::*;

pub const INTERESTING: &[&str] = &[
    "0",
    "1",
    "-1",
    "2147483648",
    "4294967296",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "1e308",
    "1e309",
    "-1e308",
    "5e-324",
    "nan",
    "inf",
    "-inf",
    "Infinity",
    "0x7fffffffffffffff",
    "1_000",
    "1.5",
    "16e",
    "16383p",
    "1e30s",
    "99999999999999h",
    "nan%",
    "200%",
    "infMB/s",
    "4KiB",
    "0.5us",
    "${NOPE}",
    "$pagesize",
    "(1+2)",
    "é",
    "/dev/sda",
    "",
    "\"",
    "[]",
    "true",
];
const JUNK: &[&[u8]] = &[
    b"\0",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"\xc3\x28",
    b"{{{{{{{{",
    b"\r\n",
    b"=",
    b"\t",
];

#[derive(Clone, Debug)]
pub enum Edit {
    Delete(usize),
    Duplicate(usize, usize),
    Swap(usize, usize),
    Truncate(usize),
    Value(usize, &'static str),
    Number(usize, &'static str),
    Junk(usize, usize),
    Flip(usize, u8),
}

pub fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let value = prop::sample::select(INTERESTING);
    let edit = prop_oneof![
        any::<usize>().prop_map(Edit::Delete),
        (
            any::<usize>(),
            prop::sample::select(vec![1usize, 2, 10, 300])
        )
            .prop_map(|(i, n)| Edit::Duplicate(i, n)),
        (any::<usize>(), any::<usize>()).prop_map(|(i, j)| Edit::Swap(i, j)),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), value.clone()).prop_map(|(i, v)| Edit::Value(i, v)),
        (any::<usize>(), value).prop_map(|(i, v)| Edit::Number(i, v)),
        (any::<usize>(), 0..JUNK.len()).prop_map(|(i, j)| Edit::Junk(i, j)),
        (any::<usize>(), 0u8..8).prop_map(|(i, b)| Edit::Flip(i, b)),
    ];
    prop::collection::vec(edit, 1..=4)
}

fn lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn join(lines: &[Vec<u8>]) -> Vec<u8> {
    lines.join(&b'\n')
}

/// `seed` after `edits`.
pub fn apply(seed: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut data = seed.to_vec();
    for e in edits {
        let mut ls = lines(&data);
        let n = ls.len();
        match *e {
            Edit::Delete(i) => {
                ls.remove(i % n);
                data = join(&ls);
            }
            Edit::Duplicate(i, times) => {
                let line = ls[i % n].clone();
                for _ in 0..times {
                    ls.insert(i % n, line.clone());
                }
                data = join(&ls);
            }
            Edit::Swap(i, j) => {
                ls.swap(i % n, j % n);
                data = join(&ls);
            }
            Edit::Truncate(i) => data.truncate(i % (data.len() + 1)),
            Edit::Value(i, v) => {
                // The value of the i-th line that has one (after `=`).
                let with = (0..n)
                    .filter(|&k| ls[k].contains(&b'='))
                    .collect::<Vec<_>>();
                if let Some(&k) = with.get(i % with.len().max(1)) {
                    let at = ls[k].iter().position(|&b| b == b'=').unwrap() + 1;
                    ls[k].truncate(at);
                    ls[k].extend_from_slice(v.as_bytes());
                    data = join(&ls);
                }
            }
            Edit::Number(i, v) => {
                let starts: Vec<usize> = (0..data.len())
                    .filter(|&k| {
                        data[k].is_ascii_digit() && (k == 0 || !data[k - 1].is_ascii_digit())
                    })
                    .collect();
                if let Some(&s) = starts.get(i % starts.len().max(1)) {
                    let end = (s..data.len())
                        .find(|&k| !data[k].is_ascii_digit())
                        .unwrap_or(data.len());
                    data.splice(s..end, v.bytes());
                }
            }
            Edit::Junk(i, j) => {
                let at = i % (data.len() + 1);
                data.splice(at..at, JUNK[j].iter().copied());
            }
            Edit::Flip(i, bit) => {
                if !data.is_empty() {
                    let at = i % data.len();
                    data[at] ^= 1 << bit;
                }
            }
        }
    }
    data
}
