//! Starts a control plane, prints `pids <etcd> <kube-apiserver>` and then either waits to be
//! killed (`wait`) or panics (`panic`, once a line arrives on stdin: the test first sees the
//! children running, which it could not if the panic came right after the pids). The no-orphans
//! test uses it to prove that the children die with their parent however it ends.

use std::io::Write;

#[tokio::main]
async fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "wait".to_owned());
    let cp = match myownshell_envtest::ControlPlane::start().await {
        Ok(cp) => cp,
        Err(e) => {
            eprintln!("envtest-probe: {e}");
            std::process::exit(2);
        }
    };
    let pids: Vec<String> = cp.pids().iter().map(u32::to_string).collect();
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "pids {}", pids.join(" "));
    let _ = stdout.flush();
    if mode == "panic" {
        let mut go = String::new();
        let _ = std::io::stdin().read_line(&mut go);
        // Leak the control plane so no destructor runs: only the kernel's pdeathsig can help.
        std::mem::forget(cp);
        panic!("envtest-probe: panicking on purpose with children running");
    }
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
    }
}
