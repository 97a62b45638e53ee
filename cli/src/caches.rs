//! Cache and library-handle rules: the built-in rules file (`caches.rules`, compiled in), its
//! parser, the `cache:` lines of a suppression file turned into rules, and the anchored match of
//! an allocating stack against them.
//!
//! Owns what "held by a cache" means for one stack; never reads dumps, groups blocks or decides
//! the gate (`analyze` does). The rule syntax and the anchoring are documented at the top of
//! `caches.rules` and in docs/report-format.md; keep the three in step.

use std::fmt;
use std::ops::Deref;
use std::path::{Path, PathBuf};

use cudaleak_format::{Frame, FrameKind};

use crate::suppressions::{Pattern, Rule};

/// The built-in rules, exactly as `cudaleak report --list-caches` prints them.
pub const BUILTIN: &str = include_str!("caches.rules");

/// Where a rule was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `caches.rules`, the `[id]` line.
    Builtin { line: usize },
    /// A `cache:` line of a suppression file.
    Suppressions { file: PathBuf, line: usize },
}

/// One cache or library handle that can hold blocks live at exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheRule {
    /// Short stable name: `pytorch-native`; for a `cache:` line, the line as written.
    pub id: String,
    /// What holds the memory, in words.
    pub name: String,
    /// What would release it.
    pub release: String,
    /// What a growth suspect of this cache means, where its stack alone would mislead (a pool
    /// allocates where it ran out, not where the memory it hands out is kept).
    pub grows: Option<String>,
    /// `blocks = segments`: each block is a pool's segment that many objects share, so one more
    /// segment can be a leak; otherwise each block is one object (a tensor, a workspace), and
    /// growth of one or two is not a trend (`report --growth`).
    pub segments: bool,
    /// `empty = TEXT`: how a program gives back what the cache holds that no object of its own
    /// uses. Where it did (`report --pools-emptied`, the pytest plugin after a test), blocks the
    /// cache still holds are held by objects the program keeps: leaks of the window examined.
    pub empty: Option<String>,
    pub origin: Origin,
    anchors: Vec<Pattern>,
    within: Vec<Pattern>,
    modules: Vec<Pattern>,
    except: Vec<Pattern>,
    /// A `cache:` line: its one anchor is matched against function, source file and module.
    any_field: bool,
}

#[derive(Debug)]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "caches.rules:{}: {}", self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

/// The built-in rules.
pub fn builtin() -> Result<Vec<CacheRule>, ParseError> {
    parse(BUILTIN)
}

/// The rules in use: the `cache:` lines of a suppression file first (in file order), then the
/// built-in ones.
pub fn rules(user: &[Rule]) -> Result<Vec<CacheRule>, ParseError> {
    let mut out: Vec<CacheRule> = user.iter().map(from_suppression).collect();
    out.extend(builtin()?);
    Ok(out)
}

fn from_suppression(r: &Rule) -> CacheRule {
    CacheRule {
        id: r.text(),
        name: format!("{} ({}:{})", r.text(), r.file.display(), r.line),
        release: "your rule: what your cache frees".into(),
        grows: None,
        // A cache of the user's is taken for a pool: one more of its blocks can be a leak.
        segments: true,
        empty: None,
        origin: Origin::Suppressions {
            file: r.file.clone(),
            line: r.line,
        },
        anchors: vec![Pattern::new(&r.pattern)],
        within: Vec::new(),
        modules: Vec::new(),
        except: Vec::new(),
        any_field: true,
    }
}

/// Parses a rules file (see the top of `caches.rules`).
pub fn parse(text: &str) -> Result<Vec<CacheRule>, ParseError> {
    let mut rules: Vec<CacheRule> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        let fail = |message: String| ParseError {
            line: i + 1,
            message,
        };
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(id) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let id = id.trim();
            if id.is_empty()
                || !id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(fail(format!(
                    "rule id {id:?} must be letters, digits, '-' or '_'"
                )));
            }
            if rules.iter().any(|r| r.id == id) {
                return Err(fail(format!("rule [{id}] is defined twice")));
            }
            rules.push(CacheRule {
                id: id.to_string(),
                name: String::new(),
                release: String::new(),
                grows: None,
                segments: false,
                empty: None,
                origin: Origin::Builtin { line: i + 1 },
                anchors: Vec::new(),
                within: Vec::new(),
                modules: Vec::new(),
                except: Vec::new(),
                any_field: false,
            });
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(fail(format!("expected KEY = VALUE, found {line:?}")));
        };
        let (key, value) = (key.trim(), value.trim());
        let Some(rule) = rules.last_mut() else {
            return Err(fail(format!("{key} before the first [id]")));
        };
        if value.is_empty() {
            return Err(fail(format!("empty value for {key}")));
        }
        match key {
            "name" => rule.name = value.to_string(),
            "release" => rule.release = value.to_string(),
            "grows" => rule.grows = Some(value.to_string()),
            "empty" => rule.empty = Some(value.to_string()),
            "blocks" if value == "segments" => rule.segments = true,
            "blocks" if value == "objects" => rule.segments = false,
            "blocks" => {
                return Err(fail(format!(
                    "blocks is segments or objects, not {value:?}"
                )))
            }
            "anchor" => rule.anchors.push(Pattern::new(value)),
            "within" => rule.within.push(Pattern::new(value)),
            "module" => rule.modules.push(Pattern::new(value)),
            "except" => rule.except.push(Pattern::new(value)),
            other => return Err(fail(format!("unknown key {other:?}"))),
        }
    }
    for r in &rules {
        let Origin::Builtin { line } = r.origin else {
            continue;
        };
        let missing = |what: &str| ParseError {
            line,
            message: format!("rule [{}] has no {what}", r.id),
        };
        if r.name.is_empty() {
            return Err(missing("name"));
        }
        if r.release.is_empty() {
            return Err(missing("release"));
        }
        if r.anchors.is_empty() && r.within.is_empty() && r.modules.is_empty() {
            return Err(missing("anchor, within or module"));
        }
    }
    Ok(rules)
}

fn any(patterns: &[Pattern], name: Option<&str>) -> bool {
    name.is_some_and(|n| patterns.iter().any(|p| p.matches(n)))
}

/// A module matches by its full path or its file name.
fn any_module(patterns: &[Pattern], module: Option<&str>) -> bool {
    module.is_some_and(|m| {
        let base = m.rsplit('/').next().unwrap_or(m);
        patterns.iter().any(|p| p.matches(m) || p.matches(base))
    })
}

impl CacheRule {
    fn is_anchor<S: Deref<Target = str>>(&self, f: &Frame<S>) -> bool {
        if self.any_field {
            return any(&self.anchors, f.function.as_deref())
                || any(&self.anchors, f.file.as_deref())
                || any_module(&self.anchors, f.module.as_deref());
        }
        any(&self.anchors, f.function.as_deref())
    }

    /// A frame of the library: its function is `within`, or its module is (a Python frame's
    /// module is its source file).
    fn is_library<S: Deref<Target = str>>(&self, f: &Frame<S>) -> bool {
        let module = match f.kind {
            Some(FrameKind::Python) => f.file.as_deref(),
            None => f.module.as_deref(),
        };
        any(&self.within, f.function.as_deref()) || any_module(&self.modules, module)
    }

    /// Whether the rule holds a block allocated from `frames`, whose first frame is the one that
    /// called the CUDA API (the runtime's, driver's and API entry frames already passed over).
    pub fn matches<S: Deref<Target = str>>(&self, frames: &[Frame<S>]) -> bool {
        let mut library = false;
        for f in frames {
            if any(&self.except, f.function.as_deref()) {
                return false;
            }
            if self.is_anchor(f) {
                return true;
            }
            if !self.is_library(f) {
                break;
            }
            library = true;
        }
        self.anchors.is_empty() && library
    }

    /// Where the rule was written, for reports: `caches.rules:42` or `ci.supp:3`.
    pub fn location(&self) -> String {
        match &self.origin {
            Origin::Builtin { line } => format!("caches.rules:{line}"),
            Origin::Suppressions { file, line } => format!("{}:{line}", file.display()),
        }
    }

    /// Whether the rule is built in.
    pub fn is_builtin(&self) -> bool {
        matches!(self.origin, Origin::Builtin { .. })
    }
}

/// The first rule (in order) that holds a block allocated from `frames`, whose frames before
/// `start` are the CUDA runtime's, the driver's and the API entry point.
pub fn classify<S: Deref<Target = str>>(
    rules: &[CacheRule],
    frames: &[Frame<S>],
    start: usize,
) -> Option<usize> {
    let tail = frames.get(start..)?;
    if tail.is_empty() {
        return None;
    }
    rules.iter().position(|r| r.matches(tail))
}

/// `--list-caches`: the built-in file as written, then the `cache:` lines of a suppression file.
pub fn listing(user: &[Rule], file: Option<&Path>) -> String {
    let mut s = BUILTIN.to_string();
    if let Some(file) = file {
        s.push_str(&format!(
            "\n# `cache:` lines of {} (tried before the rules above):\n",
            file.display()
        ));
        if user.is_empty() {
            s.push_str("#   (none)\n");
        }
        for r in user {
            s.push_str(&format!("{}    # line {}\n", r.text(), r.line));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suppressions::RuleKind;
    use cudaleak_format::Hex;

    fn frame(function: Option<&str>, module: &str) -> Frame {
        Frame {
            ip: Hex(0x1000),
            module: Some(module.into()),
            offset: Some(Hex(0x10)),
            function: function.map(str::to_string),
            file: None,
            line: None,
            kind: None,
        }
    }

    fn id_of(rules: &[CacheRule], frames: &[Frame]) -> Option<String> {
        classify(rules, frames, 0).map(|i| rules[i].id.clone())
    }

    const TORCH: &str = "/venv/lib/python3.12/site-packages/torch/lib/libc10_cuda.so";
    const ALLOC_BLOCK: &str = "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::alloc_block(c10::cuda::CUDACachingAllocator::Native::(anonymous namespace)::AllocParams&, bool, std::shared_ptr<c10::GatheredContext> const&, std::unique_lock<std::recursive_mutex>&)";

    #[test]
    fn the_builtin_file_parses_and_every_rule_has_a_name_and_a_release() {
        let rules = builtin().unwrap();
        let ids: Vec<&str> = rules.iter().map(|r| r.id.as_str()).collect();
        for want in [
            "pytorch-native",
            "pytorch-async",
            "cublas",
            "cudnn",
            "cufft",
            "cusolver",
            "cusparse",
            "nccl",
            "cupy-pool",
            "rmm-pool",
            "xla-bfc",
        ] {
            assert!(ids.contains(&want), "{want} missing from {ids:?}");
        }
        assert!(rules.iter().all(|r| r.is_builtin()));
        assert!(rules[0].location().starts_with("caches.rules:"));
    }

    #[test]
    fn pytorch_segments_match_through_the_library_s_own_frames() {
        let rules = builtin().unwrap();
        let frames = [
            frame(None, TORCH),
            frame(Some(ALLOC_BLOCK), TORCH),
            frame(
                Some("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::malloc(void**, signed char, unsigned long, CUstream_st*)"),
                TORCH,
            ),
            frame(Some("at::detail::empty_cuda(…)"), "/torch/lib/libtorch_cuda.so"),
        ];
        assert_eq!(id_of(&rules, &frames).as_deref(), Some("pytorch-native"));
        let async_frames = [
            frame(
                Some("c10::cuda::CUDACachingAllocator::CudaMallocAsync::(anonymous namespace)::mallocAsync(void**, signed char, unsigned long, CUstream_st*)"),
                TORCH,
            ),
            frame(Some("python_main"), "/usr/bin/python3.12"),
        ];
        assert_eq!(
            id_of(&rules, &async_frames).as_deref(),
            Some("pytorch-async")
        );
    }

    /// PyTorch with its cache off: NativeCachingAllocator::allocate calls cudaMalloc for the
    /// tensor itself (the H200's stacks, 2026-12-03); a tensor kept alive is the program's leak.
    #[test]
    fn a_pytorch_tensor_with_the_cache_off_is_not_cached_memory() {
        let rules = builtin().unwrap();
        let frames = [
            frame(
                Some("c10::cuda::CUDACachingAllocator::Native::NativeCachingAllocator::allocate(unsigned long)"),
                TORCH,
            ),
            frame(
                Some("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet, c10::ScalarType, std::optional<c10::MemoryFormat>)"),
                "/torch/lib/libtorch_cpu.so",
            ),
        ];
        assert_eq!(id_of(&rules, &frames), None);
        // ... but the workspace it allocates for a cuBLAS handle is the handle's (H200,
        // 2026-12-04: 2 × 32 MiB, main thread and autograd's).
        let workspace = [
            frames[0].clone(),
            frame(
                Some("at::cuda::setWorkspaceForHandle(cublasContext*, c10::cuda::CUDAStream)"),
                "/torch/lib/libtorch_cuda.so",
            ),
            frame(
                Some("at::cuda::getCurrentCUDABlasHandle()"),
                "/torch/lib/libtorch_cuda.so",
            ),
        ];
        assert_eq!(
            id_of(&rules, &workspace).as_deref(),
            Some("pytorch-blas-workspace")
        );
        // With the cache on, a segment made for the workspace is the workspace too, held for the
        // life of the process: not a tensor a test kept, even once the pools are emptied.
        let cached = [
            frame(Some(ALLOC_BLOCK), TORCH),
            frames[0].clone(),
            workspace[1].clone(),
        ];
        assert_eq!(
            id_of(&rules, &cached).as_deref(),
            Some("pytorch-blas-workspace")
        );
        // A segment made for any other tensor stays the pool's.
        let tensor = [
            frame(Some(ALLOC_BLOCK), TORCH),
            frames[0].clone(),
            frame(
                Some("at::detail::empty_cuda(c10::ArrayRef<long>, c10::TensorOptions const&)"),
                "/torch/lib/libtorch_cuda.so",
            ),
        ];
        assert_eq!(id_of(&rules, &tensor).as_deref(), Some("pytorch-native"));
    }

    #[test]
    fn user_code_that_allocates_is_never_hidden_by_a_cache_higher_up() {
        let rules = builtin().unwrap();
        // The user's function called cudaMalloc; the caching allocator is above it (a callback).
        let frames = [
            frame(Some("my_alloc_hook(unsigned long)"), "/app/libhook.so"),
            frame(Some(ALLOC_BLOCK), TORCH),
        ];
        assert_eq!(id_of(&rules, &frames), None);
        // Library frames, then user code, then the anchor: the walk stops at the user's frame.
        let frames = [
            frame(None, TORCH),
            frame(Some("user_helper()"), "/app/app"),
            frame(Some(ALLOC_BLOCK), TORCH),
        ];
        assert_eq!(id_of(&rules, &frames), None);
        // Frames of the library without the anchor: not the cache (another part of libc10_cuda).
        let frames = [
            frame(Some("c10::cuda::something_else()"), TORCH),
            frame(Some("main"), "/app/app"),
        ];
        assert_eq!(id_of(&rules, &frames), None);
    }

    #[test]
    fn handle_libraries_match_on_their_own_unsymbolised_frames_and_except_hands_memory_out() {
        let rules = builtin().unwrap();
        let cublas = "/venv/nvidia/cublas/lib/libcublas.so.13";
        let frames = [
            frame(None, cublas),
            frame(None, cublas),
            frame(Some("cublasCreate_v2"), cublas),
            frame(
                Some("at::cuda::getCurrentCUDABlasHandle()"),
                "libtorch_cuda.so",
            ),
        ];
        assert_eq!(id_of(&rules, &frames).as_deref(), Some("cublas"));
        // cublasAlloc gives the block to its caller.
        let frames = [
            frame(None, cublas),
            frame(Some("cublasAlloc"), cublas),
            frame(Some("main"), "/app/app"),
        ];
        assert_eq!(id_of(&rules, &frames), None);
        let cufft = "/usr/local/cuda/lib64/libcufft.so.12";
        let frames = [frame(None, cufft), frame(Some("cufftXtMalloc"), cufft)];
        assert_eq!(id_of(&rules, &frames), None);
        let frames = [frame(None, cufft), frame(Some("cufftMakePlan1d"), cufft)];
        assert_eq!(id_of(&rules, &frames).as_deref(), Some("cufft"));
        let cudnn = "/venv/nvidia/cudnn/lib/libcudnn_graph.so.9";
        assert_eq!(
            id_of(&rules, &[frame(None, cudnn)]).as_deref(),
            Some("cudnn")
        );
        // libcublasLt is not libcublas, but is its own module pattern.
        let lt = "/venv/nvidia/cublas/lib/libcublasLt.so.13";
        assert_eq!(id_of(&rules, &[frame(None, lt)]).as_deref(), Some("cublas"));
    }

    #[test]
    fn rmm_pools_match_but_a_plain_upstream_allocation_does_not() {
        let rules = builtin().unwrap();
        let exe = "/app/app";
        let upstream = frame(
            Some(
                "rmm::mr::cuda_memory_resource::do_allocate(unsigned long, rmm::cuda_stream_view)",
            ),
            exe,
        );
        let pool = [
            upstream.clone(),
            frame(Some("rmm::mr::pool_memory_resource<rmm::mr::cuda_memory_resource>::try_to_expand(unsigned long, unsigned long, rmm::cuda_stream_view)"), exe),
            frame(Some("main"), exe),
        ];
        assert_eq!(id_of(&rules, &pool).as_deref(), Some("rmm-pool"));
        let plain = [
            upstream,
            frame(
                Some("rmm::device_buffer::allocate_async(unsigned long)"),
                exe,
            ),
            frame(Some("leaky()"), exe),
            frame(
                Some("rmm::mr::pool_memory_resource<rmm::mr::cuda_memory_resource>::do_allocate(unsigned long, rmm::cuda_stream_view)"),
                exe,
            ),
        ];
        assert_eq!(id_of(&rules, &plain), None);
    }

    #[test]
    fn xla_bfc_matches_but_the_platform_allocator_does_not() {
        let rules = builtin().unwrap();
        let plugin = "/venv/jax_plugins/xla_cuda13/xla_cuda_plugin.so";
        let bfc = [
            frame(
                Some("stream_executor::gpu::CudaExecutor::Allocate(unsigned long, long)"),
                plugin,
            ),
            frame(
                Some("stream_executor::DeviceMemAllocator::Alloc(unsigned long, unsigned long, unsigned long*)"),
                plugin,
            ),
            frame(Some("tsl::BFCAllocator::Extend(unsigned long, unsigned long)"), plugin),
        ];
        assert_eq!(id_of(&rules, &bfc).as_deref(), Some("xla-bfc"));
        let platform = [
            bfc[0].clone(),
            frame(Some("xla::PjRtStreamExecutorClient::Allocate()"), plugin),
            frame(None, "/usr/bin/python3.12"),
        ];
        assert_eq!(id_of(&rules, &platform), None);
    }

    #[test]
    fn cupy_pools_match_through_cython_glue_but_not_the_raw_allocator() {
        let rules = builtin().unwrap();
        let mem = "/venv/cupy/cuda/memory.cpython-312-x86_64-linux-gnu.so";
        let rt = "/venv/cupy_backends/cuda/api/runtime.cpython-312-x86_64-linux-gnu.so";
        let head = [
            frame(
                Some("__pyx_f_13cupy_backends_4cuda_3api_7runtime_malloc"),
                rt,
            ),
            frame(Some("__pyx_pw_4cupy_4cuda_6memory_6Memory_1__init__"), mem),
            // As on the H200: the interpreter's static functions have no name.
            frame(None, "/opt/venv/bin/python3.12"),
            frame(Some("type_call"), "/usr/bin/python3.12"),
            frame(Some("_PyObject_MakeTpCall"), "/usr/bin/python3.12"),
            frame(Some("__pyx_f_4cupy_4cuda_6memory__malloc"), mem),
        ];
        let mut pooled = head.to_vec();
        pooled.push(frame(
            Some("__pyx_f_4cupy_4cuda_6memory_22SingleDeviceMemoryPool__malloc"),
            mem,
        ));
        assert_eq!(id_of(&rules, &pooled).as_deref(), Some("cupy-pool"));
        let mut raw = head.to_vec();
        raw.push(frame(
            Some("_PyEval_EvalFrameDefault"),
            "/usr/bin/python3.12",
        ));
        assert_eq!(id_of(&rules, &raw), None);
    }

    fn python(function: &str, file: &str) -> Frame {
        Frame {
            ip: Hex(0),
            module: None,
            offset: Some(Hex(0x2a)),
            function: Some(function.into()),
            file: Some(file.into()),
            line: Some(1),
            kind: Some(FrameKind::Python),
        }
    }

    #[test]
    fn numba_arrays_match_through_its_python_driver_but_a_script_s_own_call_does_not() {
        let rules = builtin().unwrap();
        let bindings = "/venv/lib/python3.12/site-packages/cuda/bindings/driver.cpython-312.so";
        let driver = "/venv/lib/python3.12/site-packages/numba_cuda/numba/cuda/cudadrv/driver.py";
        // The stack of `cuda.device_array_like(a)` as the H200 recorded it (numba-cuda 0.68).
        let numba = [
            frame(None, bindings),
            python(
                "Driver._cuda_python_wrap_fn.<locals>.safe_cuda_api_call",
                driver,
            ),
            python("NumbaCUDAMemoryManager.memalloc.<locals>.allocator", driver),
            python("<module>", "/work/numba_ok.py"),
        ];
        assert_eq!(id_of(&rules, &numba).as_deref(), Some("numba"));
        // A script calling cuda-python's cuMemAlloc itself owns the block.
        let own = [frame(None, bindings), python("<module>", "/work/raw.py")];
        assert_eq!(id_of(&rules, &own), None);
    }

    #[test]
    fn cache_lines_are_anchors_on_function_file_or_module_and_come_first() {
        let user = [Rule::with_kind(
            RuleKind::Cache,
            "libmypool.so",
            Path::new("ci.supp"),
            4,
        )];
        let rules = rules(&user).unwrap();
        assert_eq!(rules[0].id, "cache:libmypool.so");
        assert_eq!(rules[0].location(), "ci.supp:4");
        let frames = [frame(Some("grow()"), "/opt/lib/libmypool.so")];
        assert_eq!(classify(&rules, &frames, 0), Some(0));
        // Only at the allocating end.
        let frames = [
            frame(Some("leak()"), "/app/app"),
            frame(Some("grow()"), "/opt/lib/libmypool.so"),
        ];
        assert_eq!(classify(&rules, &frames, 0), None);
        // `start` passes over the CUDA frames; nothing past the end matches.
        let frames = [
            frame(Some("cudaMalloc"), "/usr/lib/libcudart.so.13"),
            frame(Some("grow()"), "/opt/lib/libmypool.so"),
        ];
        assert_eq!(classify(&rules, &frames, 1), Some(0));
        assert_eq!(classify(&rules, &frames, 2), None);
        assert_eq!(classify(&rules, &frames, 9), None);
    }

    #[test]
    fn malformed_rules_are_refused_with_their_line() {
        let e = parse("name = x\n").unwrap_err();
        assert_eq!(e.to_string(), "caches.rules:1: name before the first [id]");
        let e = parse("[a b]\n").unwrap_err();
        assert_eq!(e.line, 1);
        let e = parse("[a]\nname = A\nrelease = r\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "caches.rules:1: rule [a] has no anchor, within or module"
        );
        let e = parse("[a]\nname = A\nrelease = r\nmodule = x\n[a]\n").unwrap_err();
        assert_eq!(e.line, 5);
        let e = parse("[a]\ncolour = red\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(parse("[a]\nname = A\nrelease = r\nmodule = x\n").is_ok());
    }

    #[test]
    fn the_listing_is_the_builtin_file_then_the_user_s_lines() {
        let user = [Rule::with_kind(
            RuleKind::Cache,
            "MyPool::*",
            Path::new("ci.supp"),
            2,
        )];
        let s = listing(&user, Some(Path::new("ci.supp")));
        assert!(s.starts_with(BUILTIN));
        assert!(s.ends_with("cache:MyPool::*    # line 2\n"), "{s}");
        assert_eq!(listing(&[], None), BUILTIN);
    }
}
