//! Member selection: weighted power of two choices on in-flight requests per unit of weight.

use std::sync::Arc;

use crate::config::Member;

/// Pick a member among those not in `exclude` (indices already tried). `None` when every member
/// is excluded, drained (weight 0) or at its concurrency cap.
pub fn pick_member(members: &[Arc<Member>], exclude: &[usize]) -> Option<usize> {
    let eligible = |i: usize| {
        let m = &members[i];
        m.weight > 0
            && !exclude.contains(&i)
            && m.max_concurrency
                .is_none_or(|cap| m.state.inflight() < u64::from(cap))
    };
    let total: u64 = (0..members.len())
        .filter(|&i| eligible(i))
        .map(|i| u64::from(members[i].weight))
        .sum();
    if total == 0 {
        return None;
    }
    let draw = || {
        let mut ticket = fastrand::u64(0..total);
        for (i, member) in members.iter().enumerate() {
            if !eligible(i) {
                continue;
            }
            let w = u64::from(member.weight);
            if ticket < w {
                return i;
            }
            ticket -= w;
        }
        0
    };
    let a = draw();
    let b = draw();
    // Lower load per unit of weight wins: inflight_a / w_a <= inflight_b / w_b, cross-multiplied.
    let (ma, mb) = (&members[a], &members[b]);
    let load_a = u128::from(ma.state.inflight()) * u128::from(mb.weight);
    let load_b = u128::from(mb.state.inflight()) * u128::from(ma.weight);
    Some(if load_a <= load_b { a } else { b })
}
