# sched autoschedule blur.py: the best schedule found
def apply_schedule(funcs):
    """Apply this schedule; funcs maps names to Funcs and Inputs."""
    funcs['blur_y'].split('y', 'y', 'y.i', 2, tail='auto')
    funcs['blur_y'].split('x', 'x', 'x.i', 16, tail='auto')
    funcs['blur_y'].reorder('y', 'x', 'y.i', 'x.i')
    funcs['blur_y'].vectorize('x.i')
    funcs['blur_y'].parallel('y')
    funcs['blur_x'].compute_inline()
