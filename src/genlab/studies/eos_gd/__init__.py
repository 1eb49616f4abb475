"""Edge of stability under full-batch gradient descent (Cohen, Kaur, Li, Kolter, Talwalkar 2021).

Claim: with full-batch GD at step size η, the sharpness λ_max(∇²L) rises during training
("progressive sharpening") until it reaches 2/η, the largest curvature GD is stable at, and then
hovers just above it while the loss keeps falling over long windows, non-monotonically.

Setup (notes/science.md section 2): x ~ N(0, I₂₀), n = 500, labels from a random 20-64-10 tanh
teacher; a 20-100-100-10 tanh MLP, loss ½‖f − onehot(y)‖² averaged over examples, full-batch GD
for 1500 steps at η ∈ {0.2, 0.3}. λ_max is tracked every 50 steps by Lanczos capped at 20
Hessian-vector products, warm-started from the previous top eigenvector.
"""
