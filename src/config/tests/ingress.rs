//! `[ingress]`: off without the table; its keys checked and named; its secret read from the
//! environment and never shown.

use super::*;

fn with_ingress(body: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let text = format!("{MINIMAL}\n[ingress]\n{body}\n");
    Config::from_toml_with_env(&text, &|name| {
        env.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| (*v).to_owned())
    })
}

#[test]
fn the_ingress_is_off_unless_configured_and_fills_its_defaults() {
    assert!(Config::from_toml(MINIMAL).unwrap().ingress.is_none());
    let config = with_ingress(r#"listen = "127.0.0.1:8080""#, &[]).unwrap();
    let ingress = config.ingress.unwrap();
    assert_eq!(ingress.listen.to_string(), "127.0.0.1:8080");
    assert!(ingress.secret.is_none());
    assert_eq!(ingress.detach_grace, Duration::from_secs(30));
}

#[test]
fn ingress_errors_name_the_key_and_never_the_secret() {
    let error = |body: &str, env: &[(&str, &str)]| with_ingress(body, env).unwrap_err().to_string();
    assert!(
        error(r#"listen = "everywhere""#, &[]).starts_with("ingress.listen: `everywhere`"),
        "{}",
        error(r#"listen = "everywhere""#, &[])
    );
    assert!(error("", &[]).contains("listen"), "{}", error("", &[]));
    let unset = error(
        r#"listen = "127.0.0.1:1"
secret_env = "GATEWAY_SECRET""#,
        &[],
    );
    assert!(
        unset.starts_with("ingress.secret_env: environment variable `GATEWAY_SECRET` is not set"),
        "{unset}"
    );
    let long = error(
        r#"listen = "127.0.0.1:1"
detach_grace = "2h""#,
        &[],
    );
    assert!(long.starts_with("ingress.detach_grace"), "{long}");
    let unknown = error(
        r#"listen = "127.0.0.1:1"
secret = "x""#,
        &[],
    );
    assert!(unknown.contains("unknown field `secret`"), "{unknown}");

    let config = with_ingress(
        r#"listen = "127.0.0.1:1"
secret_env = "GATEWAY_SECRET""#,
        &[("GATEWAY_SECRET", "hunter2")],
    )
    .unwrap();
    let ingress = config.ingress.as_ref().unwrap();
    assert_eq!(ingress.secret.as_ref().unwrap().expose(), "hunter2");
    assert!(!format!("{config:?}").contains("hunter2"));
    // What check-config writes back names the variable, with the defaults filled in.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    let text = format!(
        "{MINIMAL}\n[ingress]\nlisten = \"127.0.0.1:1\"\nsecret_env = \"GATEWAY_SECRET\"\n"
    );
    std::fs::write(&file, text).unwrap();
    let (_, effective) = Config::check_names(&file).unwrap();
    assert!(
        effective.contains("secret_env = \"GATEWAY_SECRET\""),
        "{effective}"
    );
    assert!(effective.contains("detach_grace = \"30s\""), "{effective}");
}
