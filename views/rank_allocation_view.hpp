// FLAT-LLM's rank allocation per decoder layer (the paper's Figure 4): the
// normalised importance (grey, dashed) and the remaining-rank ratios w_l for a
// chosen average ratio (slider), optionally every ratio overlaid, and the
// uniform allocation for comparison. Ranks per layer are in the tooltip. The
// allocations are computed by the engine; the view only picks and draws.
#pragma once

#include <QPointF>
#include <QString>
#include <QVector>

#include "plot_view.hpp"

class QCheckBox;
class QLabel;
class QSlider;

namespace embedlab::views {

struct Allocation {
    double remaining = 0; // average remaining ratio 1 - s
    QVector<double> w;    // per layer, IPRS
    QVector<int> ranks;   // per layer
};

struct RankAllocationData {
    QString label;
    int d_head = 0;
    QVector<double> normalised;      // importance / max importance, per layer
    QVector<Allocation> allocations; // ascending remaining
    QString unavailable; // non-empty: why there is nothing to show (an encoder), drawn on the plot
};

class RankAllocationView : public DataPlotView<RankAllocationData> {
    Q_OBJECT
public:
    explicit RankAllocationView(QWidget* parent = nullptr);
    // The value under a pixel of the plot, shown as a tooltip on hover ("" if nothing).
    QString hoverText(const QPointF& pixel) const;
    int selected() const { return selected_; } // index into allocations, -1: none
    void setSelected(int index);
    void setOverlay(bool all);
    QString rankText() const; // "layer 0: 30, layer 1: 15, ..."

private:
    void draw() override;
    void redraw();

    QSlider* slider_;
    QCheckBox* overlay_;
    QLabel* ranks_;
    int selected_ = -1;
};

} // namespace embedlab::views
