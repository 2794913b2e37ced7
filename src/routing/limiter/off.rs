//! Without the `redis` feature there is no global gate: a config that asks for one is refused
//! when it is validated, so none is ever made. The types stand where the gate's would, and
//! cannot be made.

use super::{LimiterStatus, Refused};

/// No global gate: it cannot be made.
#[derive(Debug)]
pub(crate) enum GlobalGate {}

/// No global permit: none can be held.
#[derive(Debug)]
pub(crate) enum Held {}

impl GlobalGate {
    /// Never called: there is no gate.
    pub(crate) async fn acquire(&self) -> Result<Held, Refused> {
        match *self {}
    }

    /// Never called: there is no gate.
    pub(crate) async fn flush(&self) {
        match *self {}
    }

    /// Never called: there is no gate.
    pub(crate) fn status(&self) -> LimiterStatus {
        match *self {}
    }
}
