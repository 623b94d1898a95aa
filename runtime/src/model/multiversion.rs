//! One body compiled for AVX-512F and for AVX2 + FMA, chosen at run time
//! (`is_x86_feature_detected!`), the portable build otherwise: the host kernels' element-wise
//! loops (softmax, the gated feed-forward, the few-row attention products) are written once as
//! an `#[inline(always)]` function and vectorised for each instruction set by
//! `multiversioned!`.

/// Defines the function `$name`, which runs `$body` with its arguments compiled for AVX-512F
/// where the CPU has it, else for AVX2 + FMA, else as the portable build. `$body` must be
/// `#[inline(always)]`, so that each variant compiles it for its own instruction set.
macro_rules! multiversioned {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? = $body:path;
    ) => {
        $(#[$attr])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                /// # Safety
                /// The CPU must have AVX-512F.
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }

                /// # Safety
                /// The CPU must have AVX2 and FMA.
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }

                if std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has the feature the function is compiled for.
                    return unsafe { avx512($($arg),*) };
                }
                if std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
                {
                    // SAFETY: the CPU has the features the function is compiled for.
                    return unsafe { avx2($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
