//! The standard root-cause metrics (RCA literature, e.g. RCAEval): AC@k — whether a true root
//! cause is among the top k of a ranking — and Avg@5, the mean of AC@1..AC@5, here at host and
//! at datacenter level (the ranking's instances mapped to their host or datacenter, repeats
//! dropped).

/// 1.0 when one of the first `k` entries of `ranking` is in `truth`, else 0.0.
pub fn ac_at(ranking: &[String], truth: &[String], k: usize) -> f64 {
    if ranking.iter().take(k).any(|item| truth.contains(item)) {
        1.0
    } else {
        0.0
    }
}

/// Mean of AC@1 … AC@5.
pub fn avg_at_5(ranking: &[String], truth: &[String]) -> f64 {
    (1..=5).map(|k| ac_at(ranking, truth, k)).sum::<f64>() / 5.0
}

/// `items` without repeats, first occurrence kept.
pub fn dedup(items: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|item| item.to_string()).collect()
    }

    #[test]
    fn ac_and_avg_follow_their_definitions() {
        let ranking = strings(&["h3", "h1", "h2"]);
        let truth = strings(&["h1"]);
        assert_eq!(ac_at(&ranking, &truth, 1), 0.0);
        assert_eq!(ac_at(&ranking, &truth, 2), 1.0);
        assert_eq!(ac_at(&ranking, &truth, 3), 1.0);
        // AC@1..5 = 0, 1, 1, 1, 1.
        assert!((avg_at_5(&ranking, &truth) - 0.8).abs() < 1e-12);
        assert_eq!(dedup(strings(&["a", "b", "a", "c"])), strings(&["a", "b", "c"]));
    }
}
