//! `poolboy render` as a user runs it: every example combination of `examples/README.md`,
//! invalid input (exit 1 with the broker's message) and usage errors (exit 2). Never a panic.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const AT: &str = "2026-11-21T12:00:00Z";

fn example(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
        .display()
        .to_string()
}

/// A file under the test scratch directory holding `text`.
fn scratch(name: &str, text: &str) -> String {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("render_cli-{name}"));
    std::fs::write(&path, text).expect("scratch file");
    path.display().to_string()
}

fn poolboy(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_poolboy"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("poolboy runs");
    let mut input = child.stdin.take().expect("stdin");
    input
        .write_all(stdin.unwrap_or_default().as_bytes())
        .expect("stdin written");
    drop(input);
    let output = child.wait_with_output().expect("poolboy ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "poolboy panicked: {stderr}");
    output
}

/// `poolboy render --at AT -f <file>…`.
fn render(files: &[&str]) -> Output {
    let mut args = vec!["render", "--at", AT];
    for file in files {
        args.extend(["-f", file]);
    }
    poolboy(&args, None)
}

/// The output of a successful render: its comment lines and its YAML documents.
struct Rendered {
    text: String,
    documents: Vec<Value>,
}

impl Rendered {
    fn of(output: &Output) -> Self {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "stderr: {stderr}");
        let text = String::from_utf8(output.stdout.clone()).expect("UTF-8 output");
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("output is not YAML: {e}\n{text}"));
        Self {
            // Comment-only documents (waiting resources) are null.
            documents: documents.into_iter().filter(|d| !d.is_null()).collect(),
            text,
        }
    }

    fn kinds(&self) -> Vec<&str> {
        self.documents
            .iter()
            .map(|d| d["kind"].as_str().unwrap_or("?"))
            .collect()
    }

    fn handle(&self) -> &Value {
        &self.documents[0]
    }

    fn annotation<'a>(&self, document: &'a Value, key: &str) -> &'a Value {
        &document["metadata"]["annotations"][format!("poolboy.gpte.redhat.com/{key}")]
    }
}

/// An invalid input: exit 1 and `error: …` on stderr.
fn invalid(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(1), "stderr: {stderr}");
    assert!(output.stdout.is_empty(), "stdout on error");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr
}

fn usage_error(output: &Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "stderr: {stderr}");
    stderr
}

#[test]
fn configmap_claim_gets_a_new_handle_and_a_configmap() {
    let out = Rendered::of(&render(&[
        &example("provider-configmap.yaml"),
        &example("claim-configmap.yaml"),
    ]));
    assert!(
        out.text
            .starts_with("# a new handle is created for the claim\n")
    );
    assert_eq!(out.kinds(), ["ResourceHandle", "ConfigMap"]);
    let handle = out.handle();
    assert_eq!(handle["metadata"]["name"], "guid-abcde");
    assert_eq!(handle["metadata"]["namespace"], "poolboy");
    assert_eq!(
        handle["metadata"]["labels"]["poolboy.gpte.redhat.com/resource-claim-name"],
        "my-config"
    );
    assert_eq!(handle["spec"]["lifespan"]["end"], "2026-11-21T14:00:00Z");
    // §6.3 defaults were applied to the claim's template.
    assert_eq!(
        handle["spec"]["resources"][0]["template"]["data"]["owner"],
        "unknown"
    );
    let configmap = &out.documents[1];
    assert_eq!(configmap["metadata"]["name"], "guid0-abcde");
    assert_eq!(configmap["metadata"]["namespace"], "poolboy-managed");
    assert_eq!(configmap["data"]["color"], "blue");
    assert_eq!(
        out.annotation(configmap, "resource-claim-name"),
        "my-config"
    );
    assert_eq!(out.annotation(configmap, "resource-index"), "0");
}

#[test]
fn lab_claim_gets_an_anarchy_subject_with_its_parameters() {
    let out = Rendered::of(&render(&[
        &example("provider-lab.yaml"),
        &example("claim-lab.yaml"),
    ]));
    assert!(
        out.text
            .contains("# the claim's spec.lifespan.end is clamped to 2026-11-22T12:00:00Z\n"),
        "{}",
        out.text
    );
    assert_eq!(out.kinds(), ["ResourceHandle", "AnarchySubject"]);
    let handle = out.handle();
    let values = &handle["spec"]["provider"]["parameterValues"];
    assert_eq!(values["region"], "eu-west");
    assert_eq!(values["size"], 4);
    // The password default template ran once.
    assert_eq!(values["password"].as_str().map(str::len), Some(12));
    assert_eq!(handle["spec"]["lifespan"]["end"], "2026-11-22T12:00:00Z");
    let subject = &out.documents[1];
    assert_eq!(subject["metadata"]["name"], "lab-abcde");
    assert_eq!(subject["metadata"]["namespace"], "anarchy");
    assert_eq!(subject["spec"]["governor"], "lab-catalog");
    assert_eq!(subject["spec"]["vars"]["job_vars"]["size"], 4);
    assert_eq!(subject["spec"]["vars"]["requester_namespace"], "user1");
    assert_eq!(out.annotation(subject, "resource-provider-name"), "lab");
}

#[test]
fn linked_claim_creates_the_namespace_and_the_config_waits_for_it() {
    let out = Rendered::of(&render(&[
        &example("provider-linked.yaml"),
        &example("claim-linked.yaml"),
    ]));
    assert_eq!(out.kinds(), ["ResourceHandle", "Namespace"]);
    let resources = &out.handle()["spec"]["resources"];
    assert_eq!(resources[0]["name"], "lab-namespace");
    assert_eq!(resources[1]["name"], "lab-config");
    assert_eq!(
        resources[1]["template"]["data"]["message"],
        "Welcome, alice"
    );
    let namespace = &out.documents[1];
    assert_eq!(namespace["metadata"]["name"], "lab-abcde");
    assert_eq!(
        namespace["metadata"]["labels"]["example.com/owner"],
        "alice"
    );
    assert!(
        out.text.contains(
            "# resource 1 (lab-config) is not created yet: waiting for Linked ResourceProvider"
        ),
        "{}",
        out.text
    );
}

#[test]
fn pool_renders_an_unclaimed_handle() {
    let out = Rendered::of(&render(&[
        &example("provider-configmap.yaml"),
        &example("pool-configmap.yaml"),
    ]));
    assert!(out.text.starts_with("# a pool handle, unclaimed\n"));
    assert_eq!(out.kinds(), ["ResourceHandle", "ConfigMap"]);
    let handle = out.handle();
    assert_eq!(
        handle["metadata"]["labels"]["poolboy.gpte.redhat.com/resource-pool-name"],
        "configmaps"
    );
    assert!(handle["spec"].get("resourceClaim").is_none());
    assert_eq!(handle["spec"]["lifespan"]["end"], "2026-11-21T13:00:00Z");
    let configmap = &out.documents[1];
    assert_eq!(
        out.annotation(configmap, "resource-pool-name"),
        "configmaps"
    );
    assert!(out.annotation(configmap, "resource-claim-name").is_null());
}

#[test]
fn configmap_claim_binds_to_the_pool() {
    let out = Rendered::of(&render(&[
        &example("provider-configmap.yaml"),
        &example("pool-configmap.yaml"),
        &example("claim-configmap.yaml"),
    ]));
    assert!(
        out.text
            .starts_with("# the claim binds to an unbound handle of pool configmaps\n")
    );
    let handle = out.handle();
    let labels = &handle["metadata"]["labels"];
    assert_eq!(
        labels["poolboy.gpte.redhat.com/resource-claim-name"],
        "my-config"
    );
    assert_eq!(
        labels["poolboy.gpte.redhat.com/resource-pool-name"],
        "configmaps"
    );
    assert_eq!(handle["spec"]["resourceClaim"]["name"], "my-config");
    // The pool's default lifespan counts from the bind.
    assert_eq!(handle["spec"]["lifespan"]["end"], "2026-11-21T14:00:00Z");
    let configmap = &out.documents[1];
    assert_eq!(configmap["data"]["color"], "blue");
    assert_eq!(
        out.annotation(configmap, "resource-claim-name"),
        "my-config"
    );
    assert_eq!(
        out.annotation(configmap, "resource-pool-name"),
        "configmaps"
    );
}

#[test]
fn input_may_come_from_standard_input() {
    let claim = std::fs::read_to_string(example("claim-configmap.yaml")).expect("example");
    let output = poolboy(
        &[
            "render",
            "--at",
            AT,
            "--handle-name",
            "guid-zzzzz",
            "-f",
            &example("provider-configmap.yaml"),
            "-f",
            "-",
        ],
        Some(&claim),
    );
    let out = Rendered::of(&output);
    assert_eq!(out.handle()["metadata"]["name"], "guid-zzzzz");
    assert_eq!(out.documents[1]["metadata"]["name"], "guid0-zzzzz");
}

#[test]
fn bad_yaml_is_invalid_input() {
    let file = scratch("bad.yaml", "kind: [unclosed\n");
    let stderr = invalid(&render(&[&example("provider-configmap.yaml"), &file]));
    assert!(stderr.contains("bad.yaml: not valid YAML"), "{stderr}");
}

#[test]
fn an_unknown_kind_is_invalid_input() {
    let stderr = invalid(&render(&[&example("anarchy-subject-crd.yaml")]));
    assert!(
        stderr.contains("kind CustomResourceDefinition is not one `poolboy render` reads"),
        "{stderr}"
    );
}

#[test]
fn a_claim_failing_validation_is_invalid_input() {
    let claim = scratch(
        "claim-too-big.yaml",
        r#"
apiVersion: poolboy.gpte.redhat.com/v1
kind: ResourceClaim
metadata: {name: big, namespace: user1}
spec:
  resources:
  - template:
      apiVersion: v1
      kind: ConfigMap
      metadata: {labels: {example.com/kind: config}}
      data: {a: "1", b: "2", c: "3", d: "4", e: "5", f: "6", g: "7", h: "8", i: "9"}
  - template:
      apiVersion: v1
      kind: ConfigMap
      metadata: {labels: {example.com/kind: config}}
      data: {count: 3}
"#,
    );
    let stderr = invalid(&render(&[&example("provider-configmap.yaml"), &claim]));
    assert!(
        stderr.starts_with("error: the ResourceClaim is invalid:\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  - spec.resources[0]: Validation check failed: data is small\n"),
        "{stderr}"
    );
    assert!(
        stderr.contains("  - spec.resources[1]: 3 is not of type 'string'"),
        "{stderr}"
    );
}

#[test]
fn parameter_errors_are_invalid_input() {
    let claim = scratch(
        "claim-bad-parameters.yaml",
        r#"
apiVersion: poolboy.gpte.redhat.com/v1
kind: ResourceClaim
metadata: {name: bad, namespace: user1}
spec:
  provider:
    name: lab
    parameterValues: {size: 3, colour: red}
"#,
    );
    let stderr = invalid(&render(&[&example("provider-lab.yaml"), &claim]));
    assert_eq!(
        stderr,
        "error: the ResourceClaim is invalid:\n  \
         - Parameter region is required.\n  \
         - Parameter size failed check: even size\n  \
         - No such parameter colour.\n"
    );
}

#[test]
fn a_provider_with_a_bad_regex_is_invalid_input() {
    let text = std::fs::read_to_string(example("provider-configmap.yaml"))
        .expect("example")
        .replace("- /data(/.*)?", "- /data(/.*?");
    let provider = scratch("provider-bad-regex.yaml", &text);
    let stderr = invalid(&render(&[&provider, &example("claim-configmap.yaml")]));
    assert!(
        stderr.starts_with(
            "error: invalid ResourceProviders:\n  - ResourceProvider configmap: spec.matchIgnore: "
        ),
        "{stderr}"
    );
}

#[test]
fn a_missing_provider_is_invalid_input() {
    let stderr = invalid(&render(&[
        &example("provider-configmap.yaml"),
        &example("claim-lab.yaml"),
    ]));
    assert_eq!(
        stderr,
        "error: the ResourceClaim is invalid:\n  - ResourceProvider lab not found\n"
    );
    let stderr = invalid(&render(&[
        &example("provider-lab.yaml"),
        &example("claim-configmap.yaml"),
    ]));
    assert!(
        stderr.contains("spec.resources[0]: Unable to match template to ResourceProvider"),
        "{stderr}"
    );
    // A linked provider that is not given.
    let linked = std::fs::read_to_string(example("provider-linked.yaml")).expect("example");
    let without_namespace = linked
        .split("\n---\n")
        .skip(1)
        .collect::<Vec<_>>()
        .join("\n---\n");
    let providers = scratch("provider-linked-partial.yaml", &without_namespace);
    let stderr = invalid(&render(&[&providers, &example("claim-linked.yaml")]));
    assert!(
        stderr.contains(
            "ResourceProvider lab-config: spec.linkedResourceProviders[0].name: \
             ResourceProvider lab-namespace not found"
        ),
        "{stderr}"
    );
}

#[test]
fn nothing_to_render_is_invalid_input() {
    let stderr = invalid(&render(&[&example("provider-configmap.yaml")]));
    assert_eq!(
        stderr,
        "error: nothing to render: give a ResourceClaim, or a ResourcePool\n"
    );
    let stderr = invalid(&render(&[&example("claim-configmap.yaml")]));
    assert_eq!(stderr, "error: no ResourceProvider given\n");
}

#[test]
fn a_missing_file_is_a_usage_error() {
    let stderr = usage_error(&render(&[
        &example("provider-configmap.yaml"),
        &example("no-such-file.yaml"),
    ]));
    assert!(
        stderr.starts_with("error: cannot read ") && stderr.contains("no-such-file.yaml"),
        "{stderr}"
    );
}

#[test]
fn a_bad_at_is_a_usage_error() {
    let output = poolboy(
        &[
            "render",
            "--at",
            "yesterday",
            "-f",
            &example("provider-configmap.yaml"),
        ],
        None,
    );
    let stderr = usage_error(&output);
    assert!(
        stderr.contains("\"yesterday\" is not an RFC 3339 timestamp"),
        "{stderr}"
    );
}

#[test]
fn no_file_is_a_usage_error() {
    usage_error(&poolboy(&["render"], None));
}

/// With `--at`, each resource whose rendering a comparison with the current time will
/// change says when; the document stays valid YAML.
#[test]
fn render_at_shows_when_a_schedule_flips() {
    let file = scratch(
        "schedule.yaml",
        r#"apiVersion: poolboy.gpte.redhat.com/v1
kind: ResourceProvider
metadata: {name: schedule, namespace: poolboy}
spec:
  match: {apiVersion: v1, kind: ConfigMap}
  matchIgnore: ["/data(/.*)?"]
  template: {enable: true}
  override:
    metadata: {namespace: managed}
    data:
      state: "{{ 'stopped' if timestamp(resource_template.data.stop) < timestamp.utcnow else 'started' }}"
---
apiVersion: poolboy.gpte.redhat.com/v1
kind: ResourceClaim
metadata: {name: lab, namespace: user1}
spec:
  resources:
  - template:
      apiVersion: v1
      kind: ConfigMap
      metadata: {name: lab}
      data: {stop: "2026-11-21T12:45:00Z"}
"#,
    );
    let rendered = Rendered::of(&render(&[&file]));
    assert!(
        rendered
            .text
            .contains("# resource 0 (schedule) changes with the clock at 2026-11-21T12:45:00Z"),
        "{}",
        rendered.text
    );
    assert_eq!(rendered.kinds(), ["ResourceHandle", "ConfigMap"]);
    assert_eq!(rendered.documents[1]["data"]["state"], "started");
}

/// `poolboy run --help` shows no Python-style `None` default and offers
/// `--log-level`; a start-up failure with `--log-json` is a JSON line, without it a plain line
/// with no colour codes (stdout is a pipe), exit code 2 for a usage error.
#[test]
fn run_help_and_start_up_failures_read_well() {
    let help = poolboy(&["run", "--help"], None);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success(), "{text}");
    assert!(!text.contains("None"), "{text}");
    assert!(
        text.contains("--log-level <LOG_LEVEL>")
            && text.contains("[possible values: error, warn, info, debug, trace]"),
        "{text}"
    );

    let line = run_without_namespace(&["--log-json"]);
    let logged: serde_json::Value = serde_json::from_str(line.trim())
        .unwrap_or_else(|e| panic!("a JSON line, not {line:?}: {e}"));
    assert_eq!(logged["level"], "ERROR");
    assert!(
        logged["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no operator namespace")),
        "{logged}"
    );

    // Plain lines, to a pipe as to a Pod's log: no terminal colour codes.
    let line = run_without_namespace(&[]);
    assert!(
        line.contains("ERROR") && line.contains("no operator namespace"),
        "{line:?}"
    );
    assert!(!line.contains('\x1b'), "colour codes in {line:?}");
}

/// `poolboy run ARGS` with no operator namespace to find, its stdout a pipe: what it logged
/// before it exited with the usage error's code 2.
fn run_without_namespace(args: &[&str]) -> String {
    let failed = Command::new(env!("CARGO_BIN_EXE_poolboy"))
        .arg("run")
        .args(args)
        .env_remove("OPERATOR_NAMESPACE")
        .env_remove("NO_COLOR")
        .output()
        .expect("running poolboy");
    assert_eq!(failed.status.code(), Some(2));
    String::from_utf8_lossy(&failed.stdout).into_owned()
}
