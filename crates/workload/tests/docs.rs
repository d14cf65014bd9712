//! docs/workload.md lists the options from the same table the parser uses.

use qoslab_workload::fio::options::options_markdown;

const BEGIN: &str = "<!-- options:begin -->\n";
const END: &str = "<!-- options:end -->";

#[test]
fn the_option_list_in_the_docs_matches_the_table() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/workload.md");
    let doc = std::fs::read_to_string(&path).expect("docs/workload.md");
    let start = doc.find(BEGIN).expect("begin marker") + BEGIN.len();
    let end = doc.find(END).expect("end marker");
    let generated = options_markdown();
    if std::env::var_os("QOSLAB_BLESS").is_some() {
        let new = format!("{}{}{}", &doc[..start], generated, &doc[end..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert!(
        doc[start..end] == generated,
        "docs/workload.md is out of date: run QOSLAB_BLESS=1 cargo test -p qoslab-workload --test docs"
    );
}
