//! The Python bootstrap `cudaleak run` gives a program: a `sitecustomize` on `PYTHONPATH` that
//! starts the reader of the frameworks' own counts (`python/cudaleak/_bootstrap.py`) and then
//! chains to the program's own `sitecustomize`, as `ddtrace-run` and coverage's subprocess
//! support do. Programs that are not Python never look at it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The `sitecustomize` module: starts the bootstrap, then imports the next `sitecustomize`.
const SITECUSTOMIZE: &str = include_str!("../../python/cudaleak/_sitecustomize.py");
/// The reader of the frameworks' counts, imported by `SITECUSTOMIZE` under this name.
const BOOTSTRAP: &str = include_str!("../../python/cudaleak/_bootstrap.py");
const BOOTSTRAP_MODULE: &str = "_cudaleak_bootstrap.py";

/// The folder of the run directory the bootstrap is written to.
pub const DIR: &str = ".python";

/// Writes the bootstrap into `run_dir`/.python and returns that folder and the `PYTHONPATH`
/// the program gets: it first, then `existing`.
pub fn install(run_dir: &Path, existing: Option<OsString>) -> Result<(PathBuf, OsString), String> {
    let dir = run_dir.join(DIR);
    if dir.as_os_str().as_encoded_bytes().contains(&b':') {
        return Err(format!(
            "{}: a path with ':' cannot be put on PYTHONPATH",
            dir.display()
        ));
    }
    let write = |name: &str, text: &str| {
        std::fs::write(dir.join(name), text)
            .map_err(|e| format!("{}: cannot write: {e}", dir.join(name).display()))
    };
    std::fs::create_dir(&dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
    write("sitecustomize.py", SITECUSTOMIZE)?;
    write(BOOTSTRAP_MODULE, BOOTSTRAP)?;
    Ok((dir.clone(), python_path(&dir, existing)))
}

/// `dir` first on a `PYTHONPATH`, then `existing` (an empty one is left out: Python would read
/// the empty entry as the working directory).
fn python_path(dir: &Path, existing: Option<OsString>) -> OsString {
    let mut v = dir.as_os_str().to_os_string();
    if let Some(e) = existing.filter(|e| !e.is_empty()) {
        v.push(":");
        v.push(e);
    }
    v
}

/// Removes what [`install`] wrote once the program has ended (the run directory keeps dumps).
pub fn remove(dir: &Path) {
    let _ = std::fs::remove_file(dir.join("sitecustomize.py"));
    let _ = std::fs::remove_file(dir.join(BOOTSTRAP_MODULE));
    // Python may have left its bytecode cache beside them.
    let _ = std::fs::remove_dir_all(dir.join("__pycache__"));
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bootstrap_comes_first_on_pythonpath_and_an_empty_one_is_dropped() {
        let d = Path::new("/r/.python");
        assert_eq!(python_path(d, None), "/r/.python");
        assert_eq!(python_path(d, Some("".into())), "/r/.python");
        assert_eq!(python_path(d, Some("/a:/b".into())), "/r/.python:/a:/b");
    }

    #[test]
    fn install_writes_both_modules_and_remove_leaves_the_run_directory_clean() {
        let run = tempfile::tempdir().unwrap();
        let (dir, path) = install(run.path(), Some("/x".into())).unwrap();
        assert_eq!(path, OsString::from(format!("{}:/x", dir.display())));
        let site = std::fs::read_to_string(dir.join("sitecustomize.py")).unwrap();
        assert!(site.contains("_cudaleak_bootstrap"), "{site}");
        assert!(dir.join(BOOTSTRAP_MODULE).is_file());
        std::fs::create_dir(dir.join("__pycache__")).unwrap();
        remove(&dir);
        assert_eq!(std::fs::read_dir(run.path()).unwrap().count(), 0);
    }
}
