//! What the benchmarks read of this machine and its processes: CPU time, memory, load, and the
//! control plane's own processes (by the pid files hack/cluster/cluster.sh keeps, since other
//! control planes may run on the machine).

use std::path::PathBuf;
use std::sync::Mutex;

/// The pid of this control plane's `name` (kube-apiserver, etcd), from the pid file
/// hack/cluster/cluster.sh keeps in `POOLBOY_CLUSTER_DIR`, or "" when unknown.
pub fn pid_of(name: &str) -> String {
    std::env::var_os("POOLBOY_CLUSTER_DIR")
        .and_then(|dir| {
            std::fs::read_to_string(PathBuf::from(dir).join(format!("{name}.pid"))).ok()
        })
        .map(|pid| pid.trim().to_owned())
        .unwrap_or_default()
}

/// CPU seconds of this control plane's kube-apiserver and etcd.
pub fn control_plane_cpu() -> [f64; 2] {
    [
        process_cpu_seconds(&pid_of("kube-apiserver")),
        process_cpu_seconds(&pid_of("etcd")),
    ]
}

/// User plus system CPU time of process `pid` ("self" for this one): /proc/<pid>/stat fields
/// 14 and 15, in Linux's fixed USER_HZ of 100 ticks a second.
pub fn process_cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|t| t.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// How often the threads of process `pid` alive now slept and woke (voluntary context
/// switches) and were preempted (involuntary ones), from each thread's /proc status.
#[allow(dead_code)] // the client floor's and benches/soak.rs's
pub fn context_switches(pid: &str) -> [u64; 2] {
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return [0, 0];
    };
    let mut switches = [0, 0];
    for thread in threads.flatten() {
        let status = std::fs::read_to_string(thread.path().join("status")).unwrap_or_default();
        for (count, name) in switches
            .iter_mut()
            .zip(["voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:"])
        {
            *count += status_figure(&status, name);
        }
    }
    switches
}

/// The KiB figures of process `pid`'s /proc status, by field name ("VmRSS:"); 0 for one it
/// lacks.
fn status_kib(pid: &str) -> impl Fn(&str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    move |name| status_figure(&status, name)
}

/// The number of field `name` ("VmRSS:") of a /proc status, without its unit; 0 when the
/// status lacks it.
fn status_figure(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap_or(0)
}

/// VmRSS and VmHWM of process `pid` ("self" for this one), in MiB.
#[allow(dead_code)] // benches/soak.rs reads them to the KiB
pub fn process_memory(pid: &str) -> (u64, u64) {
    let kib = status_kib(pid);
    (kib("VmRSS:") / 1024, kib("VmHWM:") / 1024)
}

/// VmRSS and RssAnon (its heap and stacks, without the pages of its binary and libraries, which
/// VmRSS also counts as code runs for the first time) of process `pid`, in MiB to the KiB: a
/// broker's few tens of MiB move by less than a MiB.
#[allow(dead_code)] // only benches/soak.rs tells them apart
pub fn process_memory_to_the_kib(pid: &str) -> (f64, f64) {
    let kib = status_kib(pid);
    let mib = |name: &str| kib(name) as f64 / 1024.0;
    (mib("VmRSS:"), mib("RssAnon:"))
}

/// The size of etcd's database file in MiB, when the control plane's directory is known
/// (`POOLBOY_CLUSTER_DIR`, as hack/bench.sh sets it).
#[allow(dead_code)] // only benches/scale.rs prints it
pub fn etcd_db_size() -> Option<u64> {
    let dir = std::env::var_os("POOLBOY_CLUSTER_DIR")?;
    let db = PathBuf::from(dir).join("etcd-data/member/snap/db");
    Some(std::fs::metadata(db).ok()?.len() / (1024 * 1024))
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The `p` quantile of `sorted` (nearest rank); NaN when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index.min(sorted.len() - 1)]
}

/// The benchmarks' records, shared by their watches and phases; a panic elsewhere does not
/// poison them.
pub fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
