//! `model-runtime health`: the probe a container's HEALTHCHECK runs. Exit 0 only when the
//! server answers SERVING; 1 for any other answer or none; 2 for an address that is not one.

use crate::common;

use std::time::Duration;

use common::process::{run, start_server};

const LIMIT: Duration = Duration::from_secs(20);

#[test]
fn health_exits_zero_only_for_serving() {
    let (_server, addr) = start_server(LIMIT);
    let ok = run(&["health", "--addr", &addr], LIMIT);
    assert!(ok.status.success(), "{ok:?}");
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), "SERVING");
    let service = run(
        &[
            "health",
            "--addr",
            &addr,
            "--service",
            "model_runtime.v1.ModelRuntime",
        ],
        LIMIT,
    );
    assert!(service.status.success(), "{service:?}");

    // A service the server does not know is not serving.
    let unknown = run(
        &["health", "--addr", &addr, "--service", "nope.v1.Nope"],
        LIMIT,
    );
    assert_eq!(unknown.status.code(), Some(1), "{unknown:?}");

    // Nobody listening: no answer.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let nobody = closed.local_addr().unwrap().to_string();
    drop(closed);
    let none = run(&["health", "--addr", &nobody, "--timeout", "1s"], LIMIT);
    assert_eq!(none.status.code(), Some(1), "{none:?}");

    let bad = run(&["health", "--addr", "not an address"], LIMIT);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}
