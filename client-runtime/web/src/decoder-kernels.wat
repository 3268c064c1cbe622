;; The text generator's fixed kernels: everything of a llama-family decoder
;; step that is not a matrix product (those are webtune's tuned kernels,
;; matmul_q4_1, matmul_q8_0, matmul_q4 and matmul). One module on the
;; model's memory (`env.memory`, shared with the tuned kernels). Both
;; executors of the decoder graph load this same file: the browser runtime
;; (assembled by build.mjs with wabt) and the native runner
;; (`webtune_client_runtime::decoder`, assembled with the `wat` crate).
;;
;; Every pointer is a byte offset, 16-byte aligned; every row length (the
;; hidden size, a head, the FFN width, a row stride) is a multiple of 4
;; floats, which the executors check before calling. Lengths are counts of
;; floats unless a name says bytes. A kernel never reads or writes outside
;; the rows it is given: the attention kernel reads the cache only at
;; positions [0, pos0 + row], which earlier calls of kv_store wrote.

(module
  (import "env" "memory" (memory 1))

  ;; Sum of the four lanes.
  (func $hsum (param $v v128) (result f32)
    (f32.add
      (f32.add (f32x4.extract_lane 0 (local.get $v)) (f32x4.extract_lane 1 (local.get $v)))
      (f32.add (f32x4.extract_lane 2 (local.get $v)) (f32x4.extract_lane 3 (local.get $v)))))

  ;; [Σa, Σb, Σc, Σd]: the lanes of four vectors summed pairwise by shuffles.
  (func $hsum4 (param $a v128) (param $b v128) (param $c v128) (param $d v128) (result v128)
    (local $u v128) (local $w v128)
    (local.set $u (f32x4.add
      (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $a) (local.get $b))
      (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $a) (local.get $b))))
    (local.set $w (f32x4.add
      (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $c) (local.get $d))
      (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $c) (local.get $d))))
    (f32x4.add
      (i8x16.shuffle 0 1 2 3 8 9 10 11 16 17 18 19 24 25 26 27 (local.get $u) (local.get $w))
      (i8x16.shuffle 4 5 6 7 12 13 14 15 20 21 22 23 28 29 30 31 (local.get $u) (local.get $w))))

  (func $min_u (param $a i32) (param $b i32) (result i32)
    (select (local.get $a) (local.get $b) (i32.lt_u (local.get $a) (local.get $b))))

  ;; e^x lane-wise, for x in [-87.3, 88] (clamped to it): the encoder's
  ;; exp (Cephes' expf polynomial after a two-part ln 2 range reduction,
  ;; 2^n built in the exponent field), as a function.
  (func $exp4 (param $x v128) (result v128)
    (local $t v128) (local $n v128) (local $r v128) (local $p v128)
    (local.set $x (f32x4.max (f32x4.min (local.get $x) (v128.const f32x4 88 88 88 88))
                             (v128.const f32x4 -87.33654 -87.33654 -87.33654 -87.33654)))
    (local.set $t (f32x4.add (f32x4.mul (local.get $x) (v128.const f32x4 1.44269504 1.44269504 1.44269504 1.44269504))
                             (v128.const f32x4 12582912 12582912 12582912 12582912)))
    (local.set $n (f32x4.sub (local.get $t) (v128.const f32x4 12582912 12582912 12582912 12582912)))
    (local.set $r (f32x4.sub (local.get $x) (f32x4.mul (local.get $n) (v128.const f32x4 0.693359375 0.693359375 0.693359375 0.693359375))))
    (local.set $r (f32x4.add (local.get $r) (f32x4.mul (local.get $n) (v128.const f32x4 2.12194440e-4 2.12194440e-4 2.12194440e-4 2.12194440e-4))))
    (local.set $p (f32x4.add (f32x4.mul (v128.const f32x4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4 1.9875691500e-4) (local.get $r))
                             (v128.const f32x4 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3 1.3981999507e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3 8.3334519073e-3)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2 4.1665795894e-2)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1 1.6666665459e-1)))
    (local.set $p (f32x4.add (f32x4.mul (local.get $p) (local.get $r)) (v128.const f32x4 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1 5.0000001201e-1)))
    (f32x4.mul
      (f32x4.add (f32x4.add (f32x4.mul (local.get $p) (f32x4.mul (local.get $r) (local.get $r))) (local.get $r)) (v128.const f32x4 1 1 1 1))
      (i32x4.shl (i32x4.add (local.get $t) (v128.const i32x4 -1262485377 -1262485377 -1262485377 -1262485377)) (i32.const 23))))

  ;; Test hook: n floats at $x (n a multiple of 4) through exp into $y.
  (func (export "exp") (param $x i32) (param $y i32) (param $n i32)
    (local $i i32) (local $end i32)
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (loop $l
      (v128.store (i32.add (local.get $y) (local.get $i)) (call $exp4 (v128.load (i32.add (local.get $x) (local.get $i)))))
      (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $end)))))

  ;; out[r] = x[r] / sqrt(mean(x[r]²) + eps) ⊙ w for r < rows, rows of h
  ;; floats; out may be x.
  (func (export "rmsnorm") (param $x i32) (param $w i32) (param $out i32) (param $rows i32) (param $h i32) (param $eps f32)
    (local $r i32) (local $i i32) (local $rb i32) (local $xr i32) (local $or i32) (local $acc v128) (local $v v128) (local $inv v128)
    (local.set $rb (i32.shl (local.get $h) (i32.const 2)))
    (block $done
      (br_if $done (i32.eqz (local.get $rows)))
      (loop $row
        (local.set $xr (i32.add (local.get $x) (i32.mul (local.get $r) (local.get $rb))))
        (local.set $or (i32.add (local.get $out) (i32.mul (local.get $r) (local.get $rb))))
        (local.set $acc (v128.const i32x4 0 0 0 0))
        (local.set $i (i32.const 0))
        (loop $sq
          (local.set $v (v128.load (i32.add (local.get $xr) (local.get $i))))
          (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $v) (local.get $v))))
          (br_if $sq (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $rb))))
        (local.set $inv (f32x4.splat (f32.div (f32.const 1)
          (f32.sqrt (f32.add (f32.div (call $hsum (local.get $acc)) (f32.convert_i32_u (local.get $h))) (local.get $eps))))))
        (local.set $i (i32.const 0))
        (loop $sc
          (v128.store (i32.add (local.get $or) (local.get $i))
            (f32x4.mul (f32x4.mul (v128.load (i32.add (local.get $xr) (local.get $i))) (local.get $inv))
                       (v128.load (i32.add (local.get $w) (local.get $i)))))
          (br_if $sc (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $rb))))
        (br_if $row (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows))))))

  ;; Rotary position embedding on adjacent pairs (llama.cpp's "normal"
  ;; rope, which GGUF llama files are converted for): in each of the first
  ;; $heads heads of $hd floats of each row (rows $stride floats apart),
  ;; pair i (x[2i], x[2i+1]) of the row at position pos0 + r turns by the
  ;; angle whose cosine and sine are table[(pos0 + r)·hd/2 + i] (interleaved
  ;; f32 pairs (cos, sin), computed by the executor in f64 and rounded).
  (func (export "rope") (param $x i32) (param $rows i32) (param $stride i32) (param $heads i32) (param $hd i32)
        (param $table i32) (param $pos0 i32)
    (local $r i32) (local $i i32) (local $hb i32) (local $end i32) (local $row i32) (local $tab i32) (local $head i32)
    (local $v v128) (local $t v128) (local $c v128) (local $s v128)
    (local.set $hb (i32.shl (local.get $hd) (i32.const 2)))
    (local.set $end (i32.mul (local.get $heads) (local.get $hb)))
    (block $done
      (br_if $done (i32.eqz (local.get $rows)))
      (loop $rowl
        (local.set $row (i32.add (local.get $x) (i32.mul (local.get $r) (i32.shl (local.get $stride) (i32.const 2)))))
        ;; hd/2 pairs of 8 bytes: hd·4 bytes of table per position.
        (local.set $tab (i32.add (local.get $table) (i32.mul (i32.add (local.get $pos0) (local.get $r)) (local.get $hb))))
        (local.set $head (i32.const 0))
        (loop $hl
          (local.set $i (i32.const 0))
          (loop $pl
            (local.set $v (v128.load (i32.add (i32.add (local.get $row) (local.get $head)) (local.get $i))))
            (local.set $t (v128.load (i32.add (local.get $tab) (local.get $i))))
            (local.set $c (i8x16.shuffle 0 1 2 3 0 1 2 3 8 9 10 11 8 9 10 11 (local.get $t) (local.get $t)))
            (local.set $s (i8x16.shuffle 4 5 6 7 4 5 6 7 12 13 14 15 12 13 14 15 (local.get $t) (local.get $t)))
            ;; (a, b) -> (a·c - b·s, b·c + a·s): the swapped pair times
            ;; (-s, s) added to the pair times c.
            (v128.store (i32.add (i32.add (local.get $row) (local.get $head)) (local.get $i))
              (f32x4.add (f32x4.mul (local.get $v) (local.get $c))
                         (f32x4.mul (i8x16.shuffle 4 5 6 7 0 1 2 3 12 13 14 15 8 9 10 11 (local.get $v) (local.get $v))
                                    (f32x4.mul (local.get $s) (v128.const f32x4 -1 1 -1 1)))))
            (br_if $pl (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $hb))))
          (br_if $hl (i32.lt_u (local.tee $head (i32.add (local.get $head) (local.get $hb))) (local.get $end))))
        (br_if $rowl (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows))))))

  ;; Copies $width floats at column $kcol (keys) and $vcol (values) of each
  ;; of $rows rows ($stride floats apart) into the caches' rows pos0 + r,
  ;; each cache row $width floats.
  (func (export "kv_store") (param $x i32) (param $rows i32) (param $stride i32) (param $kcol i32) (param $vcol i32)
        (param $width i32) (param $kc i32) (param $vc i32) (param $pos0 i32)
    (local $r i32) (local $src i32) (local $dst i32) (local $wb i32)
    (local.set $wb (i32.shl (local.get $width) (i32.const 2)))
    (block $done
      (br_if $done (i32.eqz (local.get $rows)))
      (loop $row
        (local.set $src (i32.add (local.get $x) (i32.shl (i32.mul (local.get $r) (local.get $stride)) (i32.const 2))))
        (local.set $dst (i32.mul (i32.add (local.get $pos0) (local.get $r)) (local.get $wb)))
        (memory.copy (i32.add (local.get $kc) (local.get $dst)) (i32.add (local.get $src) (i32.shl (local.get $kcol) (i32.const 2))) (local.get $wb))
        (memory.copy (i32.add (local.get $vc) (local.get $dst)) (i32.add (local.get $src) (i32.shl (local.get $vcol) (i32.const 2))) (local.get $wb))
        (br_if $row (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows))))))

  ;; Causal grouped-query attention. Query head h of row r (at column h·hd
  ;; of the row, rows $stride floats apart) attends to cache positions
  ;; 0..=pos0+r of key/value head h / (heads / kv_heads) (cache rows of
  ;; kv_heads·hd floats): out[r][h·hd..] = Σ_j softmax_j(scale·q·k_j)·v_j.
  ;; The heads / kv_heads query heads that share a key/value head are done
  ;; together: each key and value row is read from the cache once for all
  ;; of them (then from L1 for the group's other heads). $scores holds
  ;; (heads / kv_heads)·(pos0 + rows + 4) floats of scratch: one row of
  ;; weights per head of the group.
  (func (export "attention") (param $x i32) (param $rows i32) (param $stride i32) (param $heads i32) (param $kvh i32)
        (param $hd i32) (param $kc i32) (param $vc i32) (param $pos0 i32) (param $scale f32) (param $out i32) (param $scores i32)
    (local $r i32) (local $g i32) (local $t i32) (local $j i32) (local $i i32) (local $n i32) (local $nb i32) (local $hb i32) (local $kvb i32)
    (local $q i32) (local $kv i32) (local $o i32) (local $group i32) (local $p i32) (local $row i32) (local $orow i32) (local $sc i32)
    (local $acc v128) (local $m f32) (local $s f32) (local $sum v128) (local $e v128) (local $inv v128) (local $mv v128)
    (local $p1 i32) (local $p2 i32) (local $p3 i32) (local $last i32) (local $a1 v128) (local $a2 v128) (local $a3 v128) (local $qv v128)
    (local.set $hb (i32.shl (local.get $hd) (i32.const 2)))
    (local.set $kvb (i32.mul (local.get $kvh) (local.get $hb)))
    (local.set $group (i32.div_u (local.get $heads) (local.get $kvh)))
    (block $done
      (br_if $done (i32.eqz (local.get $rows)))
      (loop $rowl
        (local.set $n (i32.add (i32.add (local.get $pos0) (local.get $r)) (i32.const 1)))
        ;; The scores' length in bytes, padded to whole vectors with -inf's
        ;; stand-in (-1e30: e^(-1e30 - m) is 0 after the clamp's 2^-126·e^r
        ;; times nothing, since those lanes are never summed into the output).
        ;; Head t of the group has its weights at $scores + t·nb.
        (local.set $nb (i32.shl (i32.and (i32.add (local.get $n) (i32.const 3)) (i32.const -4)) (i32.const 2)))
        (local.set $row (i32.add (local.get $x) (i32.shl (i32.mul (local.get $r) (local.get $stride)) (i32.const 2))))
        (local.set $orow (i32.add (local.get $out) (i32.shl (i32.mul (local.get $r) (i32.mul (local.get $heads) (local.get $hd))) (i32.const 2))))
        (local.set $g (i32.const 0))
        (loop $groupl
          (local.set $kv (i32.mul (local.get $g) (local.get $hb)))
          ;; Scores: four key rows at a time (j .. j+3, those past n - 1 read
          ;; as row n - 1: their scores are overwritten by the padding below),
          ;; each dotted with each head of the group in four independent sums,
          ;; so that no sum waits on the one before; the four sums into one
          ;; vector and stored as four scores.
          (local.set $last (i32.sub (local.get $n) (i32.const 1)))
          (local.set $j (i32.const 0))
          (loop $sl
            (local.set $p (i32.add (i32.add (local.get $kc) (i32.mul (local.get $j) (local.get $kvb))) (local.get $kv)))
            (local.set $p1 (i32.add (i32.add (local.get $kc) (i32.mul (call $min_u (i32.add (local.get $j) (i32.const 1)) (local.get $last)) (local.get $kvb))) (local.get $kv)))
            (local.set $p2 (i32.add (i32.add (local.get $kc) (i32.mul (call $min_u (i32.add (local.get $j) (i32.const 2)) (local.get $last)) (local.get $kvb))) (local.get $kv)))
            (local.set $p3 (i32.add (i32.add (local.get $kc) (i32.mul (call $min_u (i32.add (local.get $j) (i32.const 3)) (local.get $last)) (local.get $kvb))) (local.get $kv)))
            (local.set $t (i32.const 0))
            (loop $tl
              (local.set $q (i32.add (local.get $row) (i32.mul (i32.add (i32.mul (local.get $g) (local.get $group)) (local.get $t)) (local.get $hb))))
              (local.set $acc (v128.const i32x4 0 0 0 0))
              (local.set $a1 (v128.const i32x4 0 0 0 0))
              (local.set $a2 (v128.const i32x4 0 0 0 0))
              (local.set $a3 (v128.const i32x4 0 0 0 0))
              (local.set $i (i32.const 0))
              (loop $dl
                (local.set $qv (v128.load (i32.add (local.get $q) (local.get $i))))
                (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $qv) (v128.load (i32.add (local.get $p) (local.get $i))))))
                (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $qv) (v128.load (i32.add (local.get $p1) (local.get $i))))))
                (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $qv) (v128.load (i32.add (local.get $p2) (local.get $i))))))
                (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $qv) (v128.load (i32.add (local.get $p3) (local.get $i))))))
                (br_if $dl (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $hb))))
              (v128.store (i32.add (i32.add (local.get $scores) (i32.mul (local.get $t) (local.get $nb))) (i32.shl (local.get $j) (i32.const 2)))
                (f32x4.mul (call $hsum4 (local.get $acc) (local.get $a1) (local.get $a2) (local.get $a3)) (f32x4.splat (local.get $scale))))
              (br_if $tl (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 1))) (local.get $group))))
            (br_if $sl (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 4))) (local.get $n))))
          ;; Per head of the group: the maximum, the weights e^(s - m) in
          ;; place (a padded lane's made exactly 0), then divided by their sum.
          (local.set $t (i32.const 0))
          (loop $wl
            (local.set $sc (i32.add (local.get $scores) (i32.mul (local.get $t) (local.get $nb))))
            (local.set $m (f32.const -inf))
            (local.set $j (i32.const 0))
            (loop $ml
              (local.set $m (f32.max (local.get $m) (f32.load (i32.add (local.get $sc) (i32.shl (local.get $j) (i32.const 2))))))
              (br_if $ml (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 1))) (local.get $n))))
            (local.set $j (local.get $n))
            (block $padded
              (loop $pad
                (br_if $padded (i32.ge_u (i32.shl (local.get $j) (i32.const 2)) (local.get $nb)))
                (f32.store (i32.add (local.get $sc) (i32.shl (local.get $j) (i32.const 2))) (f32.const -1e30))
                (local.set $j (i32.add (local.get $j) (i32.const 1)))
                (br $pad)))
            (local.set $mv (f32x4.splat (local.get $m)))
            (local.set $sum (v128.const i32x4 0 0 0 0))
            (local.set $i (i32.const 0))
            (loop $el
              (local.set $e (call $exp4 (f32x4.sub (v128.load (i32.add (local.get $sc) (local.get $i))) (local.get $mv))))
              (local.set $e (v128.and (local.get $e)
                (f32x4.gt (v128.load (i32.add (local.get $sc) (local.get $i))) (v128.const f32x4 -1e29 -1e29 -1e29 -1e29))))
              (v128.store (i32.add (local.get $sc) (local.get $i)) (local.get $e))
              (local.set $sum (f32x4.add (local.get $sum) (local.get $e)))
              (br_if $el (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $nb))))
            (local.set $inv (f32x4.splat (f32.div (f32.const 1) (call $hsum (local.get $sum)))))
            (local.set $i (i32.const 0))
            (loop $il
              (v128.store (i32.add (local.get $sc) (local.get $i)) (f32x4.mul (v128.load (i32.add (local.get $sc) (local.get $i))) (local.get $inv)))
              (br_if $il (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $nb))))
            (br_if $wl (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 1))) (local.get $group))))
          ;; out_t = Σ_j w_tj·v_j, per head of the group and sixteen of its
          ;; floats at a time in four sums held over every position j (then
          ;; four at a time for a head of other than a multiple of 16 floats);
          ;; the group's value rows come from the cache once, then from L1.
          (local.set $t (i32.const 0))
          (loop $tv
            (local.set $o (i32.add (local.get $orow) (i32.mul (i32.add (i32.mul (local.get $g) (local.get $group)) (local.get $t)) (local.get $hb))))
            (local.set $sc (i32.add (local.get $scores) (i32.mul (local.get $t) (local.get $nb))))
            (local.set $i (i32.const 0))
            (block $blocks
              (loop $bl
                (br_if $blocks (i32.gt_u (i32.add (local.get $i) (i32.const 64)) (local.get $hb)))
                (local.set $acc (v128.const i32x4 0 0 0 0))
                (local.set $a1 (v128.const i32x4 0 0 0 0))
                (local.set $a2 (v128.const i32x4 0 0 0 0))
                (local.set $a3 (v128.const i32x4 0 0 0 0))
                (local.set $p (i32.add (i32.add (local.get $vc) (local.get $kv)) (local.get $i)))
                (local.set $j (i32.const 0))
                (loop $al
                  (local.set $e (v128.load32_splat (i32.add (local.get $sc) (i32.shl (local.get $j) (i32.const 2)))))
                  (local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.get $e) (v128.load (local.get $p)))))
                  (local.set $a1 (f32x4.add (local.get $a1) (f32x4.mul (local.get $e) (v128.load offset=16 (local.get $p)))))
                  (local.set $a2 (f32x4.add (local.get $a2) (f32x4.mul (local.get $e) (v128.load offset=32 (local.get $p)))))
                  (local.set $a3 (f32x4.add (local.get $a3) (f32x4.mul (local.get $e) (v128.load offset=48 (local.get $p)))))
                  (local.set $p (i32.add (local.get $p) (local.get $kvb)))
                  (br_if $al (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 1))) (local.get $n))))
                (v128.store (i32.add (local.get $o) (local.get $i)) (local.get $acc))
                (v128.store offset=16 (i32.add (local.get $o) (local.get $i)) (local.get $a1))
                (v128.store offset=32 (i32.add (local.get $o) (local.get $i)) (local.get $a2))
                (v128.store offset=48 (i32.add (local.get $o) (local.get $i)) (local.get $a3))
                (local.set $i (i32.add (local.get $i) (i32.const 64)))
                (br $bl)))
            (block $tail
              (loop $vt
                (br_if $tail (i32.ge_u (local.get $i) (local.get $hb)))
                (local.set $acc (v128.const i32x4 0 0 0 0))
                (local.set $p (i32.add (i32.add (local.get $vc) (local.get $kv)) (local.get $i)))
                (local.set $j (i32.const 0))
                (loop $at
                  (local.set $acc (f32x4.add (local.get $acc)
                    (f32x4.mul (v128.load32_splat (i32.add (local.get $sc) (i32.shl (local.get $j) (i32.const 2)))) (v128.load (local.get $p)))))
                  (local.set $p (i32.add (local.get $p) (local.get $kvb)))
                  (br_if $at (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 1))) (local.get $n))))
                (v128.store (i32.add (local.get $o) (local.get $i)) (local.get $acc))
                (local.set $i (i32.add (local.get $i) (i32.const 16)))
                (br $vt)))
            (br_if $tv (i32.lt_u (local.tee $t (i32.add (local.get $t) (i32.const 1))) (local.get $group))))
          (br_if $groupl (i32.lt_u (local.tee $g (i32.add (local.get $g) (i32.const 1))) (local.get $kvh))))
        (br_if $rowl (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows))))))

  ;; out[r][i] = silu(x[r][i])·x[r][f + i] for i < f: rows of 2f floats
  ;; (gate then up) in, rows of f out. silu(g) = g / (1 + e^-g).
  (func (export "swiglu") (param $x i32) (param $rows i32) (param $f i32) (param $out i32)
    (local $r i32) (local $i i32) (local $fb i32) (local $xr i32) (local $or i32) (local $g v128)
    (local.set $fb (i32.shl (local.get $f) (i32.const 2)))
    (block $done
      (br_if $done (i32.eqz (local.get $rows)))
      (loop $row
        (local.set $xr (i32.add (local.get $x) (i32.mul (local.get $r) (i32.shl (local.get $fb) (i32.const 1)))))
        (local.set $or (i32.add (local.get $out) (i32.mul (local.get $r) (local.get $fb))))
        (local.set $i (i32.const 0))
        (loop $l
          (local.set $g (v128.load (i32.add (local.get $xr) (local.get $i))))
          (v128.store (i32.add (local.get $or) (local.get $i))
            (f32x4.mul
              (f32x4.div (local.get $g) (f32x4.add (v128.const f32x4 1 1 1 1) (call $exp4 (f32x4.neg (local.get $g)))))
              (v128.load (i32.add (i32.add (local.get $xr) (local.get $fb)) (local.get $i)))))
          (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $fb))))
        (br_if $row (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows))))))

  ;; x[i] += y[i] for i < n (n a multiple of 4).
  (func (export "add") (param $x i32) (param $y i32) (param $n i32)
    (local $i i32) (local $end i32)
    (local.set $end (i32.shl (local.get $n) (i32.const 2)))
    (block $done
      (br_if $done (i32.eqz (local.get $n)))
      (loop $l
        (v128.store (i32.add (local.get $x) (local.get $i))
          (f32x4.add (v128.load (i32.add (local.get $x) (local.get $i))) (v128.load (i32.add (local.get $y) (local.get $i)))))
        (br_if $l (i32.lt_u (local.tee $i (i32.add (local.get $i) (i32.const 16))) (local.get $end))))))

  ;; Token embeddings, one row of h floats per id of ids[0..rows) (i32).
  ;; embed_q8: the q8_0 table, bytes [V][h] and scales d [V][h/32]:
  ;; out[r][k] = d[id][k/32]·q[id][k].
  (func (export "embed_q8") (param $ids i32) (param $rows i32) (param $w i32) (param $d i32) (param $h i32) (param $out i32)
    (local $r i32) (local $k i32) (local $id i32) (local $row i32) (local $drow i32) (local $o i32) (local $b v128) (local $sc v128)
    (block $done
      (br_if $done (i32.eqz (local.get $rows)))
      (loop $tok
        (local.set $id (i32.load (i32.add (local.get $ids) (i32.shl (local.get $r) (i32.const 2)))))
        (local.set $row (i32.add (local.get $w) (i32.mul (local.get $id) (local.get $h))))
        (local.set $drow (i32.add (local.get $d) (i32.shl (i32.mul (local.get $id) (i32.shr_u (local.get $h) (i32.const 5))) (i32.const 2))))
        (local.set $o (i32.add (local.get $out) (i32.shl (i32.mul (local.get $r) (local.get $h)) (i32.const 2))))
        (local.set $k (i32.const 0))
        (loop $l
          (local.set $sc (v128.load32_splat (i32.add (local.get $drow) (i32.shl (i32.shr_u (local.get $k) (i32.const 5)) (i32.const 2)))))
          (local.set $b (i16x8.extend_low_i8x16_s (v128.load64_zero (i32.add (local.get $row) (local.get $k)))))
          (v128.store (i32.add (local.get $o) (i32.shl (local.get $k) (i32.const 2)))
            (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_low_i16x8_s (local.get $b))) (local.get $sc)))
          (v128.store (i32.add (local.get $o) (i32.add (i32.shl (local.get $k) (i32.const 2)) (i32.const 16)))
            (f32x4.mul (f32x4.convert_i32x4_s (i32x4.extend_high_i16x8_s (local.get $b))) (local.get $sc)))
          (br_if $l (i32.lt_u (local.tee $k (i32.add (local.get $k) (i32.const 8))) (local.get $h))))
        (br_if $tok (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows))))))

  ;; embed_q4: the q4_0 or q4_1 table, words [V][h/8] (k = 8i + s in bits
  ;; 4s..4s+3 of word i), scales d [V][h/32] and, for q4_1 ($min = 1),
  ;; minimums m [V][h/32]: out = d·q + m; for q4_0 ($min = 0) out = d·(q - 8).
  (func (export "embed_q4") (param $ids i32) (param $rows i32) (param $w i32) (param $d i32) (param $m i32) (param $min i32)
        (param $h i32) (param $out i32)
    (local $r i32) (local $k i32) (local $id i32) (local $row i32) (local $blk i32) (local $o i32) (local $word i32)
    (local $s i32) (local $sc f32) (local $mn f32)
    (block $done
      (br_if $done (i32.eqz (local.get $rows)))
      (loop $tok
        (local.set $id (i32.load (i32.add (local.get $ids) (i32.shl (local.get $r) (i32.const 2)))))
        (local.set $row (i32.add (local.get $w) (i32.mul (local.get $id) (i32.shr_u (local.get $h) (i32.const 1)))))
        (local.set $blk (i32.shl (i32.mul (local.get $id) (i32.shr_u (local.get $h) (i32.const 5))) (i32.const 2)))
        (local.set $o (i32.add (local.get $out) (i32.shl (i32.mul (local.get $r) (local.get $h)) (i32.const 2))))
        (local.set $k (i32.const 0))
        (loop $l
          (local.set $sc (f32.load (i32.add (i32.add (local.get $d) (local.get $blk)) (i32.shl (i32.shr_u (local.get $k) (i32.const 5)) (i32.const 2)))))
          (local.set $mn
            (if (result f32) (local.get $min)
              (then (f32.load (i32.add (i32.add (local.get $m) (local.get $blk)) (i32.shl (i32.shr_u (local.get $k) (i32.const 5)) (i32.const 2)))))
              (else (f32.mul (local.get $sc) (f32.const -8)))))
          (local.set $word (i32.load (i32.add (local.get $row) (i32.shr_u (local.get $k) (i32.const 1)))))
          (local.set $s (i32.const 0))
          (loop $n
            (f32.store (i32.add (local.get $o) (i32.shl (i32.add (local.get $k) (local.get $s)) (i32.const 2)))
              (f32.add (f32.mul (local.get $sc) (f32.convert_i32_u (i32.and (i32.shr_u (local.get $word) (i32.shl (local.get $s) (i32.const 2))) (i32.const 15))))
                       (local.get $mn)))
            (br_if $n (i32.lt_u (local.tee $s (i32.add (local.get $s) (i32.const 1))) (i32.const 8))))
          (br_if $l (i32.lt_u (local.tee $k (i32.add (local.get $k) (i32.const 8))) (local.get $h))))
        (br_if $tok (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows))))))

  ;; embed_f32: the f32 table stored transposed, [h][V] (the B of the
  ;; output head's matmul): out[r][k] = w[k·V + id].
  (func (export "embed_f32") (param $ids i32) (param $rows i32) (param $w i32) (param $vocab i32) (param $h i32) (param $out i32)
    (local $r i32) (local $k i32) (local $id i32) (local $o i32) (local $vb i32)
    (local.set $vb (i32.shl (local.get $vocab) (i32.const 2)))
    (block $done
      (br_if $done (i32.eqz (local.get $rows)))
      (loop $tok
        (local.set $id (i32.load (i32.add (local.get $ids) (i32.shl (local.get $r) (i32.const 2)))))
        (local.set $o (i32.add (local.get $out) (i32.shl (i32.mul (local.get $r) (local.get $h)) (i32.const 2))))
        (local.set $k (i32.const 0))
        (loop $l
          (f32.store (i32.add (local.get $o) (i32.shl (local.get $k) (i32.const 2)))
            (f32.load (i32.add (i32.add (local.get $w) (i32.shl (local.get $id) (i32.const 2))) (i32.mul (local.get $k) (local.get $vb)))))
          (br_if $l (i32.lt_u (local.tee $k (i32.add (local.get $k) (i32.const 1))) (local.get $h))))
        (br_if $tok (i32.lt_u (local.tee $r (i32.add (local.get $r) (i32.const 1))) (local.get $rows))))))
)
