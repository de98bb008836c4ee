//! Iteration times and starts shared by the policies: a job's predicted
//! iteration time on a shape (stock jobs on their request only), whether its
//! request can ever run, and starting it on a type's fewest free nodes.
use crate::cluster::Shape;
use crate::view::SimView;

/// Predicted iteration time of job `i` on `shape` (its model and batch),
/// from the scheduler's knowledge. A stock job (model unknown to the
/// knowledge) runs only on its requested type, at the time its declared
/// limit implies ([`SimView::stock_iter_s`]).
pub(crate) fn iter_on(sim: &mut dyn SimView, i: usize, shape: Shape) -> Option<f64> {
    let t = sim.cluster().groups[shape.group].type_idx;
    let ty = sim.cluster().types[t].clone();
    let j = sim.job(i);
    let (model, batch, stock, req) = (j.spec.model_name.clone(), j.spec.batch_size, j.stock, j.req_type);
    if stock {
        if req != Some(t) || sim.times().is_marked(&model, batch, &ty, shape.nodes, shape.gpus_per_node) {
            return None;
        }
        return Some(sim.stock_iter_s(i));
    }
    sim.times().iter_time(&model, batch, &ty, shape.nodes, shape.gpus_per_node)
}

/// Iteration time of job `i` with `gpus` GPUs of type `t` in an idle cluster.
pub(crate) fn idle_iter(sim: &mut dyn SimView, i: usize, t: usize, gpus: u32) -> Option<f64> {
    let shape = sim.cluster().place_idle(t, gpus)?;
    iter_on(sim, i, shape)
}

/// Whether job `i`'s request (type and count) can ever run: the type exists,
/// a shape of that many GPUs exists, and the job fits on it.
pub(crate) fn requested_admissible(sim: &mut dyn SimView, i: usize) -> bool {
    let j = sim.job(i);
    match j.req_type {
        Some(t) => {
            let g = j.spec.num_gpu;
            idle_iter(sim, i, t, g).is_some()
        }
        None => false,
    }
}

/// Starts job `i` with `gpus` GPUs of type `t` on the fewest nodes free now.
/// Returns false if it does not fit now.
pub(crate) fn start_on_type(sim: &mut dyn SimView, i: usize, t: usize, gpus: u32) -> bool {
    let Some(shape) = sim.cluster().place_now(t, gpus) else { return false };
    let iter = match iter_on(sim, i, shape) {
        Some(x) => x,
        None => {
            // The knowledge learnt that the idle-cluster Cell, the one the
            // job was admitted on, cannot be used (a run failed or truth
            // lacks it): re-plan the job, which may fail it. A fragmented
            // shape the knowledge rules out changes nothing in the plan (the
            // re-plan would find the same Cell and come back here at once,
            // round after round): the job waits for the idle-cluster shape.
            let idle = sim.cluster().place_idle(t, gpus);
            let ty = sim.cluster().groups[shape.group].spec.gpu_type.clone();
            let (m, b) = (sim.job(i).spec.model_name.clone(), sim.job(i).spec.batch_size);
            if idle.is_some_and(|s| s.nodes == shape.nodes && s.gpus_per_node == shape.gpus_per_node)
                && sim.times().is_marked(&m, b, &ty, shape.nodes, shape.gpus_per_node)
            {
                sim.requeue_later(i);
            }
            return false;
        }
    };
    sim.start(i, shape, iter)
}

/// Starts job `i` as requested (type and count); false if it does not fit now.
pub(crate) fn start_requested(sim: &mut dyn SimView, i: usize) -> bool {
    let j = sim.job(i);
    match j.req_type {
        Some(t) => {
            let g = j.spec.num_gpu;
            start_on_type(sim, i, t, g)
        }
        None => false,
    }
}
