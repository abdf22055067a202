"""Programs written in the reversible language, and high-level functions over them.

The reversible programs (``cgs2``, ``bcgs2``, ``mgs``, ``cgs``, ``householder``, ``blocked_householder``,
``givens``,
``project_cgs2``, ``lstsq_cgs2``, ``normalize_program``, ``tangent_project_program``,
...) can be called, inverted and differentiated like users' own. The high-level functions (``qr``,
``qr_vjp``, ``qr_jvp``, ``project``, ``project_vjp``, ``project_jvp``, ...) allocate outputs and loop over leading batch dimensions.
"""
from revdiff.programs.api import (COMPLETE_METHODS, LSTSQ_METHODS, PROJECT_METHODS, QR_METHODS,
                                  QR_MODES, RANK_DEFICIENT, lstsq, lstsq_vjp, project, project_vjp, qr, qr_vjp, rank)
from revdiff.programs.sphere_functions import normalize, normalize_vjp, tangent_project, tangent_project_vjp
from revdiff.programs.givens import givens
from revdiff.programs.tangents import (lstsq_jvp, lstsq_vjp_jvp, normalize_jvp, normalize_vjp_jvp, project_jvp,
                                       project_vjp_jvp, qr_jvp, qr_vjp_jvp, tangent_project_jvp,
                                       tangent_project_vjp_jvp)
from revdiff.programs.gram_schmidt import bcgs2, cgs, cgs2, mgs
from revdiff.programs.householder import blocked_householder, householder
from revdiff.programs.projection import (lstsq_bcgs2, lstsq_blocked_householder, lstsq_cgs, lstsq_cgs2,
                                         lstsq_householder, lstsq_mgs, project_bcgs2, project_blocked_householder,
                                         project_cgs, project_cgs2, project_householder, project_mgs)
from revdiff.programs.sphere import normalize as normalize_program
from revdiff.programs.sphere import tangent_project as tangent_project_program

__all__ = ["QR_METHODS", "QR_MODES", "COMPLETE_METHODS", "PROJECT_METHODS", "LSTSQ_METHODS", "RANK_DEFICIENT",
           "qr", "qr_vjp", "qr_jvp", "qr_vjp_jvp", "project", "project_vjp", "project_jvp", "project_vjp_jvp",
           "lstsq", "lstsq_vjp", "lstsq_jvp", "lstsq_vjp_jvp", "rank", "normalize", "normalize_vjp", "normalize_jvp",
           "normalize_vjp_jvp", "tangent_project", "tangent_project_vjp", "tangent_project_jvp",
           "tangent_project_vjp_jvp", "cgs", "cgs2", "bcgs2", "mgs", "householder", "blocked_householder", "givens",
           "project_cgs", "project_cgs2", "project_bcgs2", "project_mgs", "project_householder",
           "project_blocked_householder", "lstsq_cgs", "lstsq_cgs2", "lstsq_bcgs2", "lstsq_mgs", "lstsq_householder",
           "lstsq_blocked_householder", "normalize_program", "tangent_project_program"]
