// KL(P_original || P_compressed) per evaluation window of one results row, with
// the window's top-1 agreement on a second axis when the run measured it: where
// in the text a compression diverges. Fed the engine's RunSummary (its
// window_kl / window_top1 arrays); the view only lays them out.
#pragma once

#include <QWidget>

#include "embedlab/results.hpp"

class QCustomPlot;
class QCPAxisRect;
class QCPGraph;
class QLabel;

namespace embedlab::views {

// The panel on an axes of any plot (the view's own, or a figure's second panel
// beside the Pareto plot): KL on the left axis, top-1 agreement on the right.
struct WindowPanel {
    QCPAxisRect* rect = nullptr;
    QCPGraph* kl = nullptr;
    QCPGraph* top1 = nullptr;
};
WindowPanel addWindowPanel(QCPAxisRect* rect);
void showWindows(const WindowPanel& panel, const embedlab::RunSummary* run); // null: empty

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
    WindowPanel panel_;
    QLabel* note_;
};

} // namespace embedlab::views
