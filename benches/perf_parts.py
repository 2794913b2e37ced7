#!/usr/bin/env python3
"""Groups a `perf script -F ip,sym` dump of the server into the runtime's hot-path parts: for each
part, the share of samples with a matching frame anywhere on the stack (inclusive; parts
overlap). Used for the profile table in BENCHMARKS.md:

    perf record -e cpu-clock -F 2000 --call-graph dwarf,16384 -p PID -o server.data -- sleep 6
    perf script -i server.data -F ip,sym > server.script
    python3 benches/perf_parts.py server.script
"""
import sys, re
PARTS = [
    ("driver task (all)", r"driver::run::\{\{closure\}\}$"),
    ("  driver: per-event stream loop", r"Driver::stream::\{\{closure\}\}$"),
    ("  driver: store appends", r"Driver::(append|flush)::\{\{closure\}\}$"),
    ("  driver: timers (Sleep/TimerEntry)", r"tokio::time::sleep::Sleep|TimerEntry|clear_entry|reregister"),
    ("  scripted provider call (plan)", r"ScriptedProvider as model_runtime::provider::Provider>::call$"),
    ("submit (validate, create, register)", r"Runtime::submit::\{\{closure\}\}$"),
    ("  store.create", r"MemoryStore as model_runtime::store::EventStore>::create$"),
    ("    evict (drop old record)", r"drop_in_place<alloc::sync::Arc<model_runtime::store::memory::Slot>>|State::evict_oldest$"),
    ("store lock wait/wake (futex)", r"Mutex>::lock_contended|RwLock>::read_contended|futex::Mutex>::unlock|drop_in_place<std::sync::poison::mutex::MutexGuard<model_runtime::store"),
    ("store appends", r"MemoryStore::append(_all)?_now$"),
    ("  subscriber wake (notify)", r"Notify::notify_waiters|watch::Sender<T>::send_replace"),
    ("watcher (cursor)", r"runtime::watch::next::\{\{closure\}\}$|watch::Cursor as futures_core::stream::Stream>::poll_next$"),
    ("encode core->wire", r"service::wire_event::WireEvent::new$|WireEvent as prost::message::Message>::encode_raw$"),
    ("prost/tonic encode", r"tonic::codec::encode::encode_item$"),
    ("h2 server stream task", r"H2Stream<F,B,Ex>::poll2$"),
    ("h2 connection task", r"hyper::proto::h2::server::Server<T,S,B,E> as core::future::future::Future>::poll$|h2::proto::connection"),
    ("malloc+free", r"^(_int_malloc|_int_free|malloc|__GI___libc_malloc|__GI___libc_free|cfree|_int_realloc|malloc_consolidate|sysmalloc|_?mi_[a-z_]*)$"),
    ("memmove (moves of large values)", r"^__memmove_avx512_unaligned_erms$|^__memcpy_avx512_unaligned_erms$"),
    ("syscalls", r"entry_SYSCALL_64_after_hwframe"),
    ("  writev (socket)", r"do_writev"),
    ("  futex", r"__x64_sys_futex"),
    ("  write (eventfd wakeups)", r"ksys_write"),
    ("  epoll_wait", r"epoll_wait"),
    ("  mprotect (malloc arenas)", r"__x64_sys_mprotect"),
    ("  getrandom (execution ids)", r"getrandom"),
]
samples, cur = [], []
for line in open(sys.argv[1], errors='replace'):
    line = line.rstrip('\n')
    if not line.strip():
        if cur: samples.append(cur)
        cur = []
        continue
    parts = line.strip().split(None, 1)
    if len(parts) == 2:
        cur.append(parts[1].replace(' (inlined)', ''))
if cur: samples.append(cur)
n = len(samples)
print(f"{n} samples")
for name, pat in PARTS:
    rx = re.compile(pat)
    hit = sum(1 for s in samples if any(rx.search(f) for f in s))
    print(f"  {100*hit/n:5.1f}%  {name}")
