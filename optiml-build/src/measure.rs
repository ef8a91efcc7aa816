//! What evaluating a candidate measured: the record the evaluator writes, the search's reward reads and the
//! cache keeps beside a tuned variant. A leaf: it names neither who measures nor who reads.

/// What evaluating one candidate measured. Counter-based fields are `None` where counters are unavailable
/// (common on cloud GPUs); [`Signals`] says where the SOL figures came from, and the reward uses what there is.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Measurement {
    /// Median kernel time, milliseconds.
    pub time_ms: f64,
    /// Spread of the timed runs: (slowest − fastest) / median, percent.
    pub spread_pct: f64,
    /// SM speed-of-light, percent.
    pub sm_sol: Option<f64>,
    /// DRAM speed-of-light, percent.
    pub dram_sol: Option<f64>,
    /// DRAM bytes moved (Nsight Compute), or the problem's minimum bytes when derived.
    pub dram_bytes: Option<f64>,
    /// Achieved TFLOP/s (from the problem's FLOP count and the median time).
    pub tflops: Option<f64>,
    /// Achieved TB/s over the problem's minimum bytes.
    pub tbps: Option<f64>,
    /// Registers per thread (ptxas).
    pub registers: u32,
    /// Bytes spilled to local memory (ptxas: spill stores + spill loads).
    pub spill_bytes: u32,
    /// Static shared memory per block, bytes (ptxas).
    pub smem_bytes: u32,
    /// Resident blocks per SM the driver reports for this launch (occupancy).
    pub blocks_per_sm: Option<u32>,
    /// Where the SOL figures came from.
    pub signals: Signals,
}

/// The source of a measurement's speed-of-light figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Signals {
    /// Nsight Compute counters (`sm__throughput`, `gpu__compute_memory_throughput`, `dram__bytes`).
    Ncu,
    /// Derived: achieved FLOP/s and minimum bytes per second against the ceilings measured on the device.
    #[default]
    Derived,
    /// Time only (synthetic evaluators, or no ceilings).
    TimeOnly,
}
