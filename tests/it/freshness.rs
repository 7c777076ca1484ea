//! Generated artifacts in the repository match what the code generates.

use crate::render::repo;

#[test]
fn udf_configs_and_wrappers_are_fresh() {
    let dir = repo().join("sql/udf");
    for (name, want) in [
        (
            "flamehouse_function.xml",
            flamehouse_udf::catalog::functions_xml(),
        ),
        ("functions.sql", flamehouse_udf::catalog::functions_sql()),
    ] {
        let got = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(
            got == want,
            "sql/udf/{name} is stale: run `cargo run -p flamehouse-udf -- config --out sql/udf`"
        );
    }
}

#[test]
fn setup_script_pins_the_engine_version_the_code_expects() {
    let script = std::fs::read_to_string(repo().join("scripts/setup-engine.sh")).unwrap();
    let want = format!(
        "CHDB_VERSION=\"{}\"",
        flamehouse::storage::engine::CHDB_VERSION
    );
    assert!(
        script.contains(&want),
        "scripts/setup-engine.sh does not pin {want}"
    );
}

#[test]
fn continuous_dashboard_is_fresh() {
    let db = flamehouse::storage::schema::default_database();
    let want =
        serde_json::to_string_pretty(&flamehouse::grafana::continuous::continuous_dashboard(&db))
            .unwrap()
            + "\n";
    let got = std::fs::read_to_string(repo().join("grafana/dashboards/continuous.json"))
        .unwrap_or_default();
    assert!(
        got == want,
        "grafana/dashboards/continuous.json is stale: run `flamehouse grafana --out grafana`"
    );
}
