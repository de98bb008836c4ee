//! Random-forest regression: bagged CART regression trees (Breiman 2001).
//!
//! Each tree is grown on a bootstrap sample; every split picks, among a
//! random subset of `max_features` features (more if none of them can split),
//! the threshold that most reduces the squared error; growth stops at
//! `max_depth`, at `min_samples_leaf`, or on a pure node. The forest predicts
//! the mean of its trees. Everything is deterministic given the seed.
use crate::rng::SplitMix64;
use crate::error::CoreError;

/// Forest hyper-parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct ForestConfig {
    /// Trees in the forest (≥ 1). Default 60.
    pub n_trees: usize,
    /// Maximum tree depth (≥ 1). Default 14.
    pub max_depth: usize,
    /// Minimum samples in a leaf (≥ 1). Default 2.
    pub min_samples_leaf: usize,
    /// Features tried per split; `None` = max(1, features / 3) (the usual
    /// regression default).
    pub max_features: Option<usize>,
    /// Seed for bootstrap and feature sampling.
    pub seed: u64,
}

impl Default for ForestConfig {
    fn default() -> Self {
        ForestConfig { n_trees: 60, max_depth: 14, min_samples_leaf: 2, max_features: None, seed: 0x5EED }
    }
}

impl ForestConfig {
    /// Checks the fields; errors name the field.
    pub fn validate(&self) -> Result<(), CoreError> {
        let check = |name: &str, v: usize| {
            if v == 0 {
                Err(CoreError::invalid(name, "0", "a positive integer"))
            } else {
                Ok(())
            }
        };
        check("n_trees", self.n_trees)?;
        check("max_depth", self.max_depth)?;
        check("min_samples_leaf", self.min_samples_leaf)?;
        if let Some(m) = self.max_features {
            check("max_features", m)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone)]
enum Node {
    Leaf(f64),
    Split { feature: usize, threshold: f64, left: usize, right: usize },
}

/// One regression tree, nodes stored flat (root at 0).
#[derive(Debug, Clone)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn predict(&self, x: &[f64]) -> f64 {
        let mut i = 0;
        loop {
            match self.nodes[i] {
                Node::Leaf(v) => return v,
                Node::Split { feature, threshold, left, right } => {
                    i = if x[feature] <= threshold { left } else { right };
                }
            }
        }
    }
}

/// A fitted random forest.
#[derive(Debug, Clone)]
pub struct RandomForest {
    trees: Vec<Tree>,
    n_features: usize,
    importances: Vec<f64>,
}

struct Builder<'a> {
    x: &'a [Vec<f64>],
    y: &'a [f64],
    cfg: &'a ForestConfig,
    mtry: usize,
    rng: SplitMix64,
    nodes: Vec<Node>,
    gain: Vec<f64>,
    scratch: Vec<(f64, f64)>,
}

impl Builder<'_> {
    fn mean(&self, idx: &[usize]) -> f64 {
        idx.iter().map(|&i| self.y[i]).sum::<f64>() / idx.len() as f64
    }

    /// Best (feature, threshold, gain) over a random feature subset.
    fn best_split(&mut self, idx: &[usize]) -> Option<(usize, f64, f64)> {
        let n = idx.len();
        let leaf = self.cfg.min_samples_leaf;
        let total: f64 = idx.iter().map(|&i| self.y[i]).sum();
        let parent = total * total / n as f64;
        let mut features: Vec<usize> = (0..self.x[0].len()).collect();
        self.rng.shuffle(&mut features);
        let mut best: Option<(usize, f64, f64)> = None;
        for (tried, &f) in features.iter().enumerate() {
            if tried >= self.mtry && best.is_some() {
                break;
            }
            self.scratch.clear();
            self.scratch.extend(idx.iter().map(|&i| (self.x[i][f], self.y[i])));
            self.scratch.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
            let mut left = 0.0;
            for k in 0..n - 1 {
                left += self.scratch[k].1;
                let nl = k + 1;
                if nl < leaf || n - nl < leaf || self.scratch[k].0 >= self.scratch[k + 1].0 {
                    continue;
                }
                let right = total - left;
                let score = left * left / nl as f64 + right * right / (n - nl) as f64 - parent;
                if score > 1e-12 && !matches!(best, Some(b) if score <= b.2) {
                    let t = 0.5 * (self.scratch[k].0 + self.scratch[k + 1].0);
                    best = Some((f, t, score));
                }
            }
        }
        best
    }

    fn grow(&mut self, idx: &mut [usize], depth: usize) -> usize {
        let id = self.nodes.len();
        self.nodes.push(Node::Leaf(self.mean(idx)));
        if depth >= self.cfg.max_depth || idx.len() < 2 * self.cfg.min_samples_leaf {
            return id;
        }
        let Some((feature, threshold, gain)) = self.best_split(idx) else { return id };
        self.gain[feature] += gain;
        // Partition in place: left part x <= threshold.
        let mut l = 0;
        for k in 0..idx.len() {
            if self.x[idx[k]][feature] <= threshold {
                idx.swap(l, k);
                l += 1;
            }
        }
        let (li, ri) = idx.split_at_mut(l);
        let left = self.grow(li, depth + 1);
        let right = self.grow(ri, depth + 1);
        self.nodes[id] = Node::Split { feature, threshold, left, right };
        id
    }
}

impl RandomForest {
    /// Fits a forest to rows `x` (all the same length, finite) and targets `y`.
    pub fn fit(x: &[Vec<f64>], y: &[f64], cfg: &ForestConfig) -> Result<Self, CoreError> {
        cfg.validate()?;
        if x.is_empty() || x.len() != y.len() {
            return Err(CoreError::invalid(
                "training set",
                format!("{} rows, {} targets", x.len(), y.len()),
                "at least one row and one target per row",
            ));
        }
        let d = x[0].len();
        if d == 0 {
            return Err(CoreError::invalid("training set", "0 features", "at least one feature"));
        }
        if let Some(r) = x.iter().position(|r| r.len() != d || r.iter().any(|v| !v.is_finite())) {
            return Err(CoreError::invalid(
                format!("training row {r}"),
                format!("{:?}", x[r]),
                format!("{d} finite features"),
            ));
        }
        if let Some(r) = y.iter().position(|v| !v.is_finite()) {
            return Err(CoreError::invalid(format!("training target {r}"), y[r].to_string(), "a finite number"));
        }
        let mtry = cfg.max_features.unwrap_or((d / 3).max(1)).min(d);
        let mut seeder = SplitMix64::new(cfg.seed);
        let mut importances = vec![0.0; d];
        let n = x.len();
        let trees = (0..cfg.n_trees)
            .map(|_| {
                let mut rng = SplitMix64::new(seeder.next_u64());
                let mut idx: Vec<usize> = (0..n).map(|_| rng.below(n)).collect();
                let mut b =
                    Builder { x, y, cfg, mtry, rng, nodes: Vec::new(), gain: vec![0.0; d], scratch: Vec::new() };
                b.grow(&mut idx, 0);
                for (acc, g) in importances.iter_mut().zip(&b.gain) {
                    *acc += g;
                }
                Tree { nodes: b.nodes }
            })
            .collect();
        let sum: f64 = importances.iter().sum();
        if sum > 0.0 {
            importances.iter_mut().for_each(|v| *v /= sum);
        }
        Ok(RandomForest { trees, n_features: d, importances })
    }

    /// Mean prediction of the trees; `x` must have the training width.
    pub fn predict(&self, x: &[f64]) -> f64 {
        assert_eq!(x.len(), self.n_features, "feature vector width");
        self.trees.iter().map(|t| t.predict(x)).sum::<f64>() / self.trees.len() as f64
    }

    /// Normalized total squared-error reduction per feature (sums to 1 unless
    /// no split was made).
    pub fn feature_importances(&self) -> &[f64] {
        &self.importances
    }

    /// Total nodes over all trees (a size measure).
    pub fn node_count(&self) -> usize {
        self.trees.iter().map(|t| t.nodes.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(n: usize, seed: u64) -> (Vec<Vec<f64>>, Vec<f64>) {
        let mut r = SplitMix64::new(seed);
        let x: Vec<Vec<f64>> = (0..n).map(|_| (0..4).map(|_| r.next_f64()).collect()).collect();
        // Step in feature 0, linear in feature 1, features 2-3 are noise.
        let y = x.iter().map(|v| if v[0] > 0.5 { 10.0 } else { 0.0 } + 4.0 * v[1] + 0.1 * r.normal()).collect();
        (x, y)
    }

    #[test]
    fn learns_a_step_and_a_slope() {
        let (x, y) = data(800, 1);
        let f = RandomForest::fit(&x, &y, &ForestConfig::default()).unwrap();
        let (xt, yt) = data(200, 2);
        let mse = xt.iter().zip(&yt).map(|(a, b)| (f.predict(a) - b).powi(2)).sum::<f64>() / 200.0;
        let mean = yt.iter().sum::<f64>() / 200.0;
        let var = yt.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / 200.0;
        assert!(mse < 0.05 * var, "mse {mse} var {var}");
        let imp = f.feature_importances();
        assert!(imp[0] > imp[2] + imp[3] && imp[1] > imp[2] + imp[3], "{imp:?}");
    }

    #[test]
    fn deterministic_given_seed() {
        let (x, y) = data(300, 3);
        let cfg = ForestConfig { n_trees: 10, ..Default::default() };
        let a = RandomForest::fit(&x, &y, &cfg).unwrap();
        let b = RandomForest::fit(&x, &y, &cfg).unwrap();
        let c = RandomForest::fit(&x, &y, &ForestConfig { seed: 99, ..cfg }).unwrap();
        let probe = [0.3, 0.7, 0.1, 0.9];
        assert_eq!(a.predict(&probe), b.predict(&probe));
        assert_ne!(a.node_count() as f64 + a.predict(&probe), c.node_count() as f64 + c.predict(&probe));
    }

    #[test]
    fn respects_leaf_size_and_constant_targets() {
        let x: Vec<Vec<f64>> = (0..10).map(|i| vec![i as f64]).collect();
        let y = vec![3.0; 10];
        let f = RandomForest::fit(&x, &y, &ForestConfig::default()).unwrap();
        assert_eq!(f.predict(&[4.0]), 3.0);
        assert_eq!(f.node_count(), 60, "pure nodes must not split");
        // Leaves of >= 5 samples out of 10: at most one split.
        let y: Vec<f64> = (0..10).map(|i| i as f64).collect();
        let cfg = ForestConfig { n_trees: 1, min_samples_leaf: 5, ..Default::default() };
        let f = RandomForest::fit(&x, &y, &cfg).unwrap();
        assert!(f.node_count() <= 3);
    }

    #[test]
    fn rejects_bad_input_naming_it() {
        let cfg = ForestConfig::default();
        assert!(RandomForest::fit(&[], &[], &cfg).unwrap_err().to_string().contains("training set"));
        let e = RandomForest::fit(&[vec![1.0], vec![f64::NAN]], &[1.0, 2.0], &cfg).unwrap_err().to_string();
        assert!(e.contains("training row 1"), "{e}");
        let e = RandomForest::fit(&[vec![1.0]], &[1.0], &ForestConfig { n_trees: 0, ..cfg }).unwrap_err().to_string();
        assert!(e.contains("n_trees"), "{e}");
    }
}
