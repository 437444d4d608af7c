// The embedding's covariance spectrum: eigenvalues (log scale) and cumulative
// explained variance, with a rank marker the user drags (or sets in the spin
// box) that shows what PCA at that rank keeps and costs. Overlays add other
// spectra (other models, FLAT-LLM's per-head value spectra); with overlays every
// curve is drawn as its share of variance, so tables of different d and scale
// compare. Every number shown is given (computed by the engine); the view only
// lays it out.
#pragma once

#include <QPointF>
#include <QString>
#include <QVector>

#include "plot_view.hpp"

class QCPGraph;
class QCPItemStraightLine;
class QLabel;
class QSpinBox;
class QMouseEvent;

namespace embedlab::views {

struct SpectrumData {
    QString label;                  // e.g. the model path
    QVector<double> eigenvalues;    // descending, length d
    QVector<double> explained;      // cumulative share at k = 1..d
    QVector<double> params_at_rank; // PCA parameters at k = 1..d
    QVector<double> flops_at_rank;  // FLOPs per token through the factors at k = 1..d
    double original_params = 0;     // V x d
};

// One extra curve. Curves with the same non-empty group (e.g. "layer 3" for that
// layer's value heads) are drawn thin and semi-transparent in one colour with a
// single legend entry; ungrouped curves get their own colour and entry.
struct SpectrumOverlay {
    QString name;
    QVector<double> eigenvalues; // descending
    QString group;
};

class SpectrumView : public DataPlotView<SpectrumData> {
    Q_OBJECT
public:
    explicit SpectrumView(QWidget* parent = nullptr);
    int rank() const { return rank_; }
    // The value under a pixel of the plot, shown as a tooltip on hover ("" if nothing).
    QString hoverText(const QPointF& pixel) const;
    QString summary() const; // the text under the plot
    // Extra curves; while any are set, every curve shows lambda_i / sum lambda.
    void setOverlays(const QVector<SpectrumOverlay>& overlays);
    void clearOverlays() { setOverlays({}); }
    const QVector<SpectrumOverlay>& overlays() const { return overlays_; }
    QVector<QCPGraph*> overlayGraphs() const { return overlay_graphs_; } // one per overlay, in order

public slots:
    void setRank(int k); // clamped to 1..d

signals:
    void rankChanged(int k);

private:
    void draw() override;
    void dragTo(QMouseEvent* event);
    void drawCurves(); // the main spectrum and the overlays, absolute or as shares

    QPointF press_;                // where the mouse went down
    bool dragging_marker_ = false; // the press was on the marker: a drag moves it
    QCPItemStraightLine* marker_;
    QSpinBox* spin_;
    QLabel* stats_;
    QVector<SpectrumOverlay> overlays_;
    QVector<QCPGraph*> overlay_graphs_;
    int rank_ = 1;
};

} // namespace embedlab::views
