"""Which minima SGD can stay in: Tr H ≤ 2/η for SGD, λ_max ≤ 2/η for GD (Wu & Su 2023).

Claim: a global minimum that is linearly stable for SGD with batch size 1 on the square loss has
Tr H ≤ 2/η, while GD's stability constrains only the top eigenvalue, λ_max ≤ 2/η (Wu, Ma & E
2018; Wu & Su 2023). So SGD ends in flatter minima (in trace) than GD at the same step size.

Setup (notes/science.md section 2): scalar regression, n = 100, x ~ N(0, I₁₀), targets from a
random tanh teacher (noise-free, so the net can interpolate); a 10-64-64-1 tanh net, loss
½·mean(f − y)², trained to loss < 1e-5 by SGD (batch 1) and by GD, η ∈ {0.02, 0.05, 0.1}; at the
end, Tr H (Hutch++, with its standard error) and λ_max (Lanczos). The bound is stated for one
output: with C outputs the per-example Hessian has rank C and the bound applies per output, which
is why this study keeps the scalar setting (a 10-class head gave Tr H = 265 against 2/η = 40).
"""
