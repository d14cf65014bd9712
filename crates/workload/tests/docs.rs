//! docs/workload.md lists the options and the engines from the same tables the parser uses.

use qoslab_workload::fio::engines::engines_markdown;
use qoslab_workload::fio::options::options_markdown;

/// The part of docs/workload.md between `<!-- NAME:begin -->` and `<!-- NAME:end -->` is
/// `generated` (QOSLAB_BLESS=1 rewrites it).
fn check(name: &str, generated: String) {
    // The tests run in parallel and each rewrites the same file under QOSLAB_BLESS.
    static FILE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _file = FILE.lock().unwrap_or_else(|e| e.into_inner());
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/workload.md");
    let doc = std::fs::read_to_string(&path).expect("docs/workload.md");
    let begin = format!("<!-- {name}:begin -->\n");
    let end_marker = format!("<!-- {name}:end -->");
    let start = doc.find(&begin).expect("begin marker") + begin.len();
    let end = doc.find(&end_marker).expect("end marker");
    if std::env::var_os("QOSLAB_BLESS").is_some() {
        let new = format!("{}{}{}", &doc[..start], generated, &doc[end..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert!(
        doc[start..end] == generated,
        "docs/workload.md ({name}) is out of date: run QOSLAB_BLESS=1 cargo test -p qoslab-workload --test docs"
    );
}

#[test]
fn the_option_list_in_the_docs_matches_the_table() {
    check("options", options_markdown());
}

#[test]
fn the_engine_list_in_the_docs_matches_the_table() {
    check("engines", engines_markdown());
}
