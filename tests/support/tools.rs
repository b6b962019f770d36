//! The `kubectl` and `helm` of the local cluster (`<cluster dir>/bin`, next to the kubeconfig),
//! run as processes against the test kubeconfig, each bounded in time.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::kubeconfig_path;

/// The directory of the cluster the tests use (`target/test-cluster` under `make test`).
pub fn cluster_dir() -> PathBuf {
    kubeconfig_path()
        .parent()
        .expect("the kubeconfig is in the cluster directory")
        .to_owned()
}

/// A binary of the cluster's bin directory (kubectl, helm).
pub fn cluster_bin(name: &str) -> PathBuf {
    let path = cluster_dir().join("bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: the local cluster (make cluster) links its binaries there",
        path.display()
    );
    path
}

/// What a finished command printed.
#[derive(Debug)]
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `program args…` with the test kubeconfig, `stdin` fed to it, and returns its output;
/// panics when it runs longer than `timeout` (it is killed) or cannot start.
/// `program` is looked up in the cluster's bin directory first, then on PATH (ctr).
pub fn run(program: &str, args: &[&str], stdin: Option<&str>, timeout: Duration) -> Output {
    let local = cluster_dir().join("bin").join(program);
    let path = if local.exists() {
        local
    } else {
        PathBuf::from(program)
    };
    let described = format!("{program} {}", args.join(" "));
    let mut child = Command::new(&path)
        .args(args)
        .env("KUBECONFIG", kubeconfig_path())
        // helm keeps its cache and config here: nothing of the user's is read or written.
        .env("HELM_CACHE_HOME", cluster_dir().join("helm/cache"))
        .env("HELM_CONFIG_HOME", cluster_dir().join("helm/config"))
        .env("HELM_DATA_HOME", cluster_dir().join("helm/data"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {described}: {e}"));
    let mut input = child.stdin.take().expect("stdin is piped");
    let text = stdin.unwrap_or_default().to_owned();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(text.as_bytes());
    });
    let mut out = child.stdout.take().expect("stdout is piped");
    let mut err = child.stderr.take().expect("stderr is piped");
    let stdout = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let stderr = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("waiting for a child") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{described} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = writer.join();
    Output {
        success: status.success(),
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// Like [`run`], and panics with its output when it fails. Returns its standard output.
pub fn run_ok(program: &str, args: &[&str], stdin: Option<&str>, timeout: Duration) -> String {
    let output = run(program, args, stdin, timeout);
    assert!(
        output.success,
        "{program} {} failed:\n{}\n{}",
        args.join(" "),
        output.stdout,
        output.stderr
    );
    output.stdout
}

/// `kubectl auth can-i <verb> <what> [-n <namespace>] --as <user>`: whether RBAC allows it.
/// `what` is as kubectl takes it: `<resource>[.<group>]`, or `<resource>/<name>`.
pub fn can_i(user: &str, verb: &str, what: &str, namespace: Option<&str>) -> bool {
    can_i_with(user, verb, what, namespace, &[])
}

/// [`can_i`] on the `status` subresource.
pub fn can_i_status(user: &str, verb: &str, what: &str, namespace: Option<&str>) -> bool {
    can_i_with(user, verb, what, namespace, &["--subresource", "status"])
}

fn can_i_with(user: &str, verb: &str, what: &str, namespace: Option<&str>, extra: &[&str]) -> bool {
    let mut args = vec!["auth", "can-i", verb, what, "--as", user];
    args.extend(extra);
    if let Some(namespace) = namespace {
        args.extend(["-n", namespace]);
    }
    let output = run("kubectl", &args, None, Duration::from_secs(30));
    match output.stdout.trim() {
        "yes" => true,
        "no" => false,
        _ => panic!(
            "kubectl {} answered neither yes nor no:\n{}\n{}",
            args.join(" "),
            output.stdout,
            output.stderr
        ),
    }
}

/// The repository's root (the chart is `helm/` there).
pub fn repo_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `helm template <release> helm/`, showing only `templates` (all when empty), with `sets`
/// (helm `--set`).
pub fn helm_template<S: AsRef<str>>(release: &str, templates: &[&str], sets: &[S]) -> String {
    let chart = repo_dir().join("helm").display().to_string();
    let mut args = vec!["template".to_owned(), release.to_owned(), chart];
    for template in templates {
        args.extend(["--show-only".to_owned(), format!("templates/{template}")]);
    }
    for set in sets {
        args.extend(["--set".to_owned(), set.as_ref().to_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_ok("helm", &args, None, Duration::from_secs(60))
}
