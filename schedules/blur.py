# sched autoschedule blur.py: the best schedule found
def apply_schedule(funcs):
    """Apply this schedule; funcs maps names to Funcs and Inputs."""
    funcs['blur_y'].split('y', 'y', 'y.i', 4, tail='split')
    funcs['blur_y'].reorder('y', 'x', 'y.i')
    funcs['blur_y'].split('x', 'x', 'x.v', 8, tail='split')
    funcs['blur_y'].vectorize('x.v')
    funcs['blur_y'].unroll('y.i')
    funcs['blur_y'].parallel('y')
    funcs['blur_x'].compute_inline()
