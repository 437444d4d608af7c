// KL(P_original || P_compressed) per evaluation window of one results row, with
// the window's top-1 agreement on a second axis when the run measured it: where
// in the text a compression diverges. Fed the engine's RunSummary (its
// window_kl / window_top1 arrays); the view only lays them out.
#pragma once

#include <QWidget>

#include "embedlab/results.hpp"

class QCustomPlot;
class QCPGraph;
class QLabel;

namespace embedlab::views {

class WindowDivergenceView : public QWidget {
    Q_OBJECT
public:
    explicit WindowDivergenceView(QWidget* parent = nullptr);
    // The row's windows (null or a row without them: an empty plot and a note).
    void setRun(const embedlab::RunSummary* run);
    QCustomPlot* plot() const { return plot_; }
    QCPGraph* klGraph() const { return kl_; }
    QCPGraph* top1Graph() const { return top1_; }
    QString note() const; // what the label above the plot says

private:
    QCustomPlot* plot_;
    QCPGraph* kl_;
    QCPGraph* top1_;
    QLabel* note_;
};

} // namespace embedlab::views
