//! The user's tuning settings: `optiml.toml` beside a package's `Cargo.toml`, or `[package.metadata.optiml]` in
//! it (the seed's §6.1 configuration, in TOML).
//!
//! ```toml
//! [search]                 # every key optional; the defaults are the seed's
//! method = "mcts"          # or "random", "exhaustive"
//! budget = 32              # candidates evaluated per kernel and shape
//! time_limit_s = 60
//! exploration = 1.4
//! max_depth = 4
//! build_time_s = 20        # search during `cargo build` on a cache miss with a GPU; 0 turns it off
//!
//! [kernels.bmm]            # per kernel, by function name
//! shapes = ["256x1024x1024x1024", "16x1024x1024x1024"]   # batch x m x n x k; one tuned variant each
//! test_shapes = ["3x100x70x33"]                          # checked element by element too
//! tolerance = { rel_l2 = 1e-5, scaled_abs = 1e-5, forgive = 2.0 }   # forgive: see `Tolerance::forgive`
//! ```

use crate::eval::Tolerance;
use crate::search::{Config, Method};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Settings of one package.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Search settings.
    #[serde(default)]
    pub search: SearchSettings,
    /// Per-kernel settings, by function name.
    #[serde(default)]
    pub kernels: BTreeMap<String, KernelEntry>,
    /// The LLM endpoint (none: no LLM is asked anything).
    #[serde(default)]
    pub llm: Option<crate::llm::LlmSettings>,
}

/// `[search]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchSettings {
    /// Tree search or a baseline.
    pub method: Option<Method>,
    /// Candidates per kernel and shape.
    pub budget: Option<usize>,
    /// Wall-clock seconds per kernel and shape.
    pub time_limit_s: Option<f64>,
    /// UCT exploration constant.
    pub exploration: Option<f64>,
    /// Transformations from the default at most.
    pub max_depth: Option<usize>,
    /// Progressive widening factor (see [`Config::widening`]).
    pub widening: Option<f64>,
    /// `"max"` (the default) or `"mean"` (see [`Config::backup`]).
    pub backup: Option<crate::search::Backup>,
    /// Seconds of search per kernel during `cargo build` (0: none).
    pub build_time_s: Option<f64>,
    /// Seed of random choices and inputs.
    pub seed: Option<u64>,
}

/// `[kernels.<name>]`.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelEntry {
    /// Shapes to tune for, `BxMxNxK`.
    #[serde(default)]
    pub shapes: Vec<String>,
    /// Extra gate shapes, `BxMxNxK`.
    #[serde(default)]
    pub test_shapes: Vec<String>,
    /// Tolerance override.
    pub tolerance: Option<Tolerance>,
}

/// A settings file that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct ConfigError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// Seconds of search per kernel in a build when the user says nothing: enough for a handful of candidates on a
/// large GPU, short enough that a first build stays pleasant.
pub const DEFAULT_BUILD_TIME_S: f64 = 20.0;

impl Settings {
    /// Reads `dir/optiml.toml`, else `[package.metadata.optiml]` of `dir/Cargo.toml`, else the defaults.
    ///
    /// # Errors
    /// [`ConfigError`] naming the file when it does not parse or names an unknown key.
    pub fn load(dir: &Path) -> Result<Self, ConfigError> {
        let own = dir.join("optiml.toml");
        if own.is_file() {
            let text = read(&own)?;
            return toml::from_str(&text).map_err(|e| ConfigError {
                path: own,
                message: e.to_string(),
            });
        }
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            return Ok(Settings::default());
        }
        let text = read(&manifest)?;
        let value: toml::Table = toml::from_str(&text).map_err(|e| ConfigError {
            path: manifest.clone(),
            message: e.to_string(),
        })?;
        let Some(section) = value
            .get("package")
            .and_then(|p| p.get("metadata"))
            .and_then(|m| m.get("optiml"))
        else {
            return Ok(Settings::default());
        };
        section.clone().try_into().map_err(|e| ConfigError {
            path: manifest,
            message: format!("[package.metadata.optiml]: {e}"),
        })
    }

    /// The search configuration: the seed's defaults, overridden by the file.
    pub fn search_config(&self) -> Config {
        let d = Config::default();
        let s = &self.search;
        Config {
            budget: s.budget.unwrap_or(d.budget),
            time_limit: s
                .time_limit_s
                .map(Duration::from_secs_f64)
                .unwrap_or(d.time_limit),
            exploration: s.exploration.unwrap_or(d.exploration),
            max_depth: s.max_depth.unwrap_or(d.max_depth),
            widening: s.widening.unwrap_or(d.widening),
            backup: s.backup.unwrap_or(d.backup),
            ..d
        }
    }

    /// The settings of kernel `name`, with its shapes parsed.
    ///
    /// # Errors
    /// A message naming the shape that does not parse.
    pub fn kernel(&self, name: &str) -> Result<KernelSettings, String> {
        let Some(k) = self.kernels.get(name) else {
            return Ok(KernelSettings::default());
        };
        let parse = |list: &[String]| -> Result<Vec<Dims>, String> {
            list.iter()
                .map(|s| {
                    parse_dims(s).ok_or_else(|| {
                        format!(
                            "kernels.{name}: `{s}` is not a shape like 16x1024x1024x1024 (sizes joined by `x`)"
                        )
                    })
                })
                .collect()
        };
        Ok(KernelSettings {
            shapes: parse(&k.shapes)?,
            test_shapes: parse(&k.test_shapes)?,
            tolerance: k.tolerance,
        })
    }
}

/// What a user may say per kernel (`[package.metadata.optiml.kernels.<name>]` or `optiml.toml`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KernelSettings {
    /// Shapes to tune for (one variant each); empty means the family's default.
    pub shapes: Vec<Dims>,
    /// Extra shapes the gate checks element by element.
    pub test_shapes: Vec<Dims>,
    /// A tolerance replacing the precision's default.
    pub tolerance: Option<Tolerance>,
}

/// A problem size as written (`256x1024x1024x1024`): the kernel's family says what each number is (a matmul
/// reads `batch x m x n x k` or `m x n x k`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Dims(pub Vec<usize>);

impl std::fmt::Display for Dims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(usize::to_string).collect();
        f.write_str(&parts.join("x"))
    }
}

/// Sizes joined by `x` (`16x1024x1024x1024`, `64x64x8`); `None` unless every one is a whole number.
pub fn parse_dims(text: &str) -> Option<Dims> {
    let dims: Vec<usize> = text
        .split(['x', 'X', '×'])
        .map(|d| d.trim().parse().ok())
        .collect::<Option<_>>()?;
    Some(Dims(dims))
}

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|e| ConfigError {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("optiml-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn metadata_table_and_own_file() {
        let d = dir("meta");
        std::fs::write(
            d.join("Cargo.toml"),
            "[package]\nname = \"x\"\n[package.metadata.optiml.search]\nbudget = 64\nmethod = \"random\"\n\
             [package.metadata.optiml.kernels.bmm]\nshapes = [\"256x1024x1024x1024\", \"64x64x8\"]\n",
        )
        .unwrap();
        let s = Settings::load(&d).unwrap();
        assert_eq!(s.search_config().budget, 64);
        assert_eq!(s.search.method, Some(Method::Random));
        let k = s.kernel("bmm").unwrap();
        assert_eq!(
            k.shapes,
            [Dims(vec![256, 1024, 1024, 1024]), Dims(vec![64, 64, 8])]
        );
        assert_eq!(k.shapes[1].to_string(), "64x64x8");
        assert_eq!(s.kernel("other").unwrap(), KernelSettings::default());
        // optiml.toml wins over the metadata table.
        std::fs::write(d.join("optiml.toml"), "[search]\nbudget = 8\n").unwrap();
        assert_eq!(Settings::load(&d).unwrap().search_config().budget, 8);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn errors_name_the_file_and_the_problem() {
        let d = dir("bad");
        std::fs::write(d.join("optiml.toml"), "[search]\nbugdet = 8\n").unwrap();
        let e = Settings::load(&d).unwrap_err().to_string();
        assert!(e.contains("optiml.toml") && e.contains("bugdet"), "{e}");
        std::fs::write(
            d.join("optiml.toml"),
            "[kernels.bmm]\nshapes = [\"16by1024\"]\n",
        )
        .unwrap();
        let e = Settings::load(&d).unwrap().kernel("bmm").unwrap_err();
        assert!(e.contains("16by1024"), "{e}");
        assert_eq!(Settings::load(&dir("none")).unwrap(), Settings::default());
    }
}
