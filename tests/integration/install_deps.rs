//! scripts/install-deps.sh decides by the package manager, not by file names:
//! with `libclang-cpp.so.*` on the machine but libclang-dev not installed (a
//! new machine of this kind), it still installs libclang-dev. Run with stub
//! `dpkg-query` and `apt-get` first on PATH, which record what is asked.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn run_with(installed: &[&str]) -> (bool, String) {
    let stubs = tempfile::tempdir().unwrap();
    let log = stubs.path().join("apt.log");
    let dpkg = format!(
        "#!/bin/sh\n# dpkg-query -W -f='${{Status}}' NAME\nfor p in {}; do [ \"$p\" = \"$3\" ] && printf 'install ok installed' && exit 0; done\nexit 1\n",
        installed.join(" ")
    );
    let apt = format!("#!/bin/sh\necho \"$@\" >> {}\n", log.display());
    for (name, body) in [("dpkg-query", dpkg), ("apt-get", apt)] {
        let p = stubs.path().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let path = format!("{}:{}", stubs.path().display(), std::env::var("PATH").unwrap());
    let out = common::output_within(
        Command::new("bash")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/install-deps.sh"))
            .env("PATH", path)
            .env_remove("LIBCLANG_PATH"),
        Duration::from_secs(60),
    );
    (out.status.success(), std::fs::read_to_string(&log).unwrap_or_default())
}

#[test]
fn libclang_dev_and_bubblewrap_are_installed_when_the_package_manager_lacks_them() {
    if !rustix::process::geteuid().is_root() {
        // The script only prints the apt-get line when not root: nothing to check without root.
        // CI runs as root, so there a skip is a failure.
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but the tests do not run as root: this test needs root"
        );
        eprintln!(
            "SKIPPED libclang_dev_and_bubblewrap_are_installed_when_the_package_manager_lacks_them: not root (scripts/install-deps.sh installs only as root)"
        );
        return;
    }
    // A new machine: libclang-cpp14 (libclang-cpp.so.14) is there, libclang-dev and bubblewrap are not.
    let (ok, log) = run_with(&["libclang-cpp14"]);
    assert!(ok);
    let install = log.lines().find(|l| l.starts_with("install")).unwrap_or_default();
    assert!(install.contains("libclang-dev") && install.contains("bubblewrap"), "{log}");
    // The single-node Slurm test's daemons, with slurm-client alone on the machine.
    let (ok, log) = run_with(&["libclang-dev", "bubblewrap", "slurm-client"]);
    assert!(ok);
    let install = log.lines().find(|l| l.starts_with("install")).unwrap_or_default();
    assert!(
        install.contains("slurm-wlm") && install.contains("munge") && !install.contains("libclang"),
        "{log}"
    );
    // All present: nothing is installed.
    let (ok, log) = run_with(&["libclang-dev", "bubblewrap", "slurm-wlm", "munge"]);
    assert!(ok);
    assert!(!log.contains("install"), "{log}");
}
