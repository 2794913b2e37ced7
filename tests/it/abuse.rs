//! The abuse suite: the real binary on small limits, attacked by callers, upstreams and its
//! own config. For each attack the attacker gets the documented typed answer, the server's
//! peak resident memory (`VmHWM` in `/proc/PID/status`) stays under a stated bound, and a
//! well-behaved caller running alongside keeps getting its whole, correct reply.
//!
//! Loopback only; every wait is bounded.

mod callers;
mod config;
mod harness;
mod upstreams;
