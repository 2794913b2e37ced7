//! The minimum Rust version the project states is true of what it builds: no package of the
//! locked tree (for this machine's platform) declares a newer `rust-version` than the workspace's (checked with the one
//! toolchain a machine has, from what each package declares), and the README and the
//! Dockerfile's build stage state the same version.

use std::path::Path;
use std::process::Command;

/// `1.94.1` as `(1, 94, 1)`; a missing part is 0.
fn version(text: &str) -> (u64, u64, u64) {
    let mut parts = text.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    let mut next = || parts.next().unwrap_or(0);
    (next(), next(), next())
}

#[test]
fn no_locked_dependency_needs_a_newer_rust_than_the_one_stated() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ours = env!("CARGO_PKG_RUST_VERSION");
    assert!(!ours.is_empty(), "Cargo.toml states a rust-version");
    // Every package of the locked tree that builds here, from the registry cache the build
    // already filled (a package only another platform builds may not be in it).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let rustc = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let host = String::from_utf8_lossy(&rustc.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc -vV names the host");
    let out = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked", "--offline"])
        .args(["--filter-platform", &host])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let metadata: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = metadata["packages"].as_array().unwrap();
    assert!(packages.len() > 100, "the whole tree: {}", packages.len());
    let newer: Vec<String> = packages
        .iter()
        .filter_map(|p| {
            Some((
                p["name"].as_str()?,
                p["version"].as_str()?,
                p["rust_version"].as_str()?,
            ))
        })
        .filter(|(_, _, needs)| version(needs) > version(ours))
        .map(|(name, at, needs)| format!("{name} {at} needs Rust {needs}"))
        .collect();
    assert!(
        newer.is_empty(),
        "Cargo.toml says rust-version {ours}, but {newer:#?}"
    );
    // The workspace's own crates state the same.
    for member in packages.iter().filter(|p| p["source"].is_null()) {
        assert_eq!(member["rust_version"], ours, "{}", member["name"]);
    }

    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("with Rust ({ours} or newer)")),
        "the README's Quick start states Rust {ours}"
    );
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains(&format!("FROM rust:{ours}-")),
        "the image builds with Rust {ours}"
    );
}
