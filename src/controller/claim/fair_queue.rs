//! A claim's turn in the fair line of the capped pool it names: when fewer
//! handles of the pool are free than claims wait for it, the first claims of the line
//! ([`core::binding::fair_queue`](crate::core::binding::fair_queue)) take them and the others wait.
//!
//! The line is made of the claims this process knows to be waiting for the pool (judged so by
//! an earlier pass: `WaitingForPool` or `WaitingInLine`), and the claim asking. A claim that
//! has let others go first for [`PATIENCE`] binds anyway: one ahead of it that can never use
//! the free handle (its templates do not fit) must not hold the line up.

use std::time::Duration;

use kube::runtime::reflector::ObjectRef;

use super::ClaimContext;
use crate::api::kinds::ClaimObject;
use crate::core::binding::fair_queue::{Waiting, position, waits_for};
use crate::core::claim::status::Unbound;

/// How long a claim lets the claims ahead of it take a free handle before it tries itself.
pub(crate) const PATIENCE: Duration = Duration::from_secs(5);

/// `None` when it is the claim's turn to try the `free` handles of `pool`, a pool capped by
/// `maxSize`, that fit it; otherwise why it waits.
pub(crate) fn turn(
    ctx: &ClaimContext,
    claim: &ClaimObject,
    pool: &str,
    free: usize,
) -> Option<Unbound> {
    if free == 0 {
        return None;
    }
    let namespace = claim.metadata.namespace.as_deref().unwrap_or_default();
    let name = claim.metadata.name.as_deref().unwrap_or_default();
    let mut line: Vec<Waiting> = ctx
        .index
        .waiting()
        .into_iter()
        .filter(|(ns, n)| !(ns == namespace && n == name))
        .filter_map(|(ns, n)| {
            let reference = ObjectRef::new_with(&n, ctx.kinds.stored_claim.clone()).within(&ns);
            let other = ctx.stores.claims.store().get(&reference)?.unpack().ok()?;
            waits_for(&other.metadata, other.status.as_ref(), pool, ctx.domain())
                .then(|| Waiting::of(&other.metadata))
        })
        .collect();
    line.push(Waiting::of(&claim.metadata));
    let (ahead, of) = position(line, &ctx.index.held(pool), namespace, name)?;
    if ahead < free || ctx.index.defer(namespace, name) >= PATIENCE {
        return None;
    }
    Some(Unbound::InLine {
        pool: pool.to_owned(),
        ahead,
        of,
    })
}
