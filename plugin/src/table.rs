//! A table as kubectl prints one: columns padded to their widest cell, three spaces apart, no
//! trailing blanks.

/// `lines` (the header first) as text.
pub fn render(lines: &[Vec<&str>]) -> String {
    let columns = lines.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns).map(|c| lines.iter().map(|l| l[c].len()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    out
}
